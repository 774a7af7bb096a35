"""ThinkMerge and RMOD on vLLM vs plain vLLM sampling and vs the HF path, measured in one interleaved run.

Run it in the vLLM environment (``scripts/setup --vllm``) on the embedded default model (SmolLM2-135M-Instruct, fp32):

    .venv-vllm/bin/python benchmarks/vllm_backend.py [--rounds 2] [--prompts 4] [--hf-python .venv/bin/python]

Per round, in this order (so machine load hits every arm alike):

1. ThinkMerge on vLLM end to end (:func:`~hfx.generation.thinkmerge.vllm.thinkmerge_vllm`: K sampled traces until
   "Final answer:" or the budget, merged greedy answer through the merge processor);
2. plain vLLM sampling of the same K traces (same seeds, so the same tokens) + K independent greedy answers;
3. the HF ThinkMerge path (``model.generate(custom_generate=thinkmerge)``) on the same questions and budgets;
4. RMOD on vLLM (:func:`~hfx.generation.rmod.vllm.rmod_vllm`, K candidates of B tokens per block, a cheap
   token-statistics value function so the engine side is what is measured);
5. plain vLLM sampling of K full continuations (``n=K``, the same token budget);
6. the HF RMOD path (``model.generate(custom_generate=rmod)``) with the same settings.

Throughput is generated row-tokens per second: every token a sequence of the engine decodes (ThinkMerge: all traces'
thinking tokens + K x the merged answer, since K rows decode it; plain: traces + the K answers; RMOD: the K
candidates of every block; plain RMOD: the K continuations). Ratios: ThinkMerge-on-vLLM tokens/s / plain tokens/s
(goal >= 0.8) and vLLM wall time / HF wall time (goal <= 0.5), the same two for RMOD; medians over rounds.

The HF arms run in a worker process with ``--hf-python`` (default: the repository's ``.venv/bin/python``, whose
transformers the HF path is written for; the vLLM environment's older transformers runs it incorrectly, see
docs/methods/vllm.md). The worker is started once and reused, so model loading is not timed.

A design (b) arm (``--design-b``) times the outer per-token loop over the K contexts with full-vocabulary log-probs on
the first prompt, for the comparison in the docs (it needs an engine with ``max_logprobs=-1``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
FINAL = "Final answer:"


def _value_function(input_ids, attention_mask):
    import torch

    m = attention_mask.float()
    mean_id = (input_ids.float() * m).sum(-1) / m.sum(-1) / 50000
    even = ((input_ids % 2 == 0).float() * m).sum(-1) / m.sum(-1)
    return torch.stack([mean_id, even], -1)


def _questions(n: int) -> list[str]:
    path = ROOT.parent / "shared" / "data" / "gsm8k" / "test.jsonl"
    if path.is_file():
        rows = [json.loads(line) for line in path.read_text().splitlines()[:n]]
        return [r["question"] for r in rows]
    return [f"Tom has {i + 3} apples and buys {2 * i + 5} more. How many apples does he have?" for i in range(n)]


def _encode(tok, questions):
    from hfx.generation.thinkmerge.baselines import build_prompt

    texts = [build_prompt(tok, q)[0] for q in questions]
    return tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)


# ------------------------------------------------------------------------------------------------------------------
# HF worker (main environment)
# ------------------------------------------------------------------------------------------------------------------


def hf_worker() -> None:
    import torch

    from hfx.generation.rmod import rmod
    from hfx.generation.thinkmerge import thinkmerge
    from hfx.models import load_default_model

    model, tok = load_default_model()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        enc = _encode(tok, job["questions"])
        P = enc["input_ids"].shape[1]
        torch.manual_seed(job["seed"])
        start = time.perf_counter()
        if job["method"] == "thinkmerge":
            out = model.generate(**enc, custom_generate=thinkmerge, num_traces=job["K"], think_end=FINAL,
                                 think_end_tokenizer=tok, max_thinking_tokens=job["budget"],
                                 max_new_tokens=job["answer"], do_sample=True, temperature=0.7, top_p=0.95, top_k=0,
                                 answer_do_sample=False, return_dict_in_generate=True, pad_token_id=tok.pad_token_id)  # fmt: skip
            seconds = time.perf_counter() - start
            answer = int((out.sequences[:, P:] != tok.pad_token_id).sum())
            tokens = int(out.candidate_lengths.sum()) + job["K"] * answer
        else:
            out = model.generate(**enc, custom_generate=rmod, value_function=_value_function, num_branches=job["K"],
                                 block_size=job["block"], max_new_tokens=job["new"], do_sample=True, temperature=0.8,
                                 top_k=0, pad_token_id=tok.pad_token_id)  # fmt: skip
            seconds = time.perf_counter() - start
            tokens = int((out[:, P:] != tok.pad_token_id).sum()) * job["K"]
        print(json.dumps({"seconds": seconds, "tokens": tokens}), flush=True)


class HFWorker:
    def __init__(self, python: str):
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "--hf-worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, cwd=str(ROOT), env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
        )  # fmt: skip
        self._read()

    def _read(self) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the HF worker exited")
            if line.startswith("{"):
                return json.loads(line)

    def run(self, **job) -> dict:
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


# ------------------------------------------------------------------------------------------------------------------
# vLLM arms
# ------------------------------------------------------------------------------------------------------------------


def vllm_thinkmerge(llm, tok, enc, K, budget, answer, seed):
    from hfx.generation.thinkmerge.vllm import thinkmerge_vllm

    start = time.perf_counter()
    out = thinkmerge_vllm(llm, enc["input_ids"], attention_mask=enc["attention_mask"], num_traces=K, think_end=FINAL,
                          tokenizer=tok, max_thinking_tokens=budget, max_new_tokens=answer, do_sample=True,
                          temperature=0.7, top_p=0.95, answer_do_sample=False, seed=seed, pad_token_id=tok.pad_token_id)  # fmt: skip
    seconds = time.perf_counter() - start
    P = enc["input_ids"].shape[1]
    answer_tokens = int((out.sequences[:, P:] != tok.pad_token_id).sum())
    return seconds, int(out.candidate_lengths.sum()) + K * answer_tokens, out


def vllm_plain_thinkmerge(llm, tok, enc, K, budget, answer, seed):
    """The same K traces (same request seeds and stops as thinkmerge_vllm's stage I) + K independent greedy answers."""
    from vllm import SamplingParams

    from hfx.integrations.vllm import eos_token_ids, generate_token_ids

    eos = eos_token_ids(llm)
    prompts = [ids[m.bool()].tolist() for ids, m in zip(enc["input_ids"], enc["attention_mask"])]
    start = time.perf_counter()
    params = [SamplingParams(temperature=0.7, top_p=0.95, max_tokens=budget, seed=seed + r, stop=[FINAL],
                             include_stop_str_in_output=True, stop_token_ids=eos)
              for r in range(len(prompts) * K)]  # fmt: skip
    outs = generate_token_ids(llm, [prompts[r // K] for r in range(len(prompts) * K)], params)
    traces = [list(o.outputs[0].token_ids) for o in outs]
    contexts = [prompts[r // K] + t for r, t in enumerate(traces)]
    answers = generate_token_ids(llm, contexts, SamplingParams(temperature=0.0, max_tokens=answer, stop_token_ids=eos,
                                                               detokenize=False))  # fmt: skip
    seconds = time.perf_counter() - start
    tokens = sum(len(t) for t in traces) + sum(len(o.outputs[0].token_ids) for o in answers)
    return seconds, tokens


def vllm_rmod(llm, tok, enc, K, block, new, seed):
    from hfx.generation.rmod.vllm import rmod_vllm

    start = time.perf_counter()
    out = rmod_vllm(llm, enc["input_ids"], attention_mask=enc["attention_mask"], value_function=_value_function,
                    num_branches=K, block_size=block, max_new_tokens=new, do_sample=True, temperature=0.8, seed=seed,
                    pad_token_id=tok.pad_token_id)  # fmt: skip
    seconds = time.perf_counter() - start
    P = enc["input_ids"].shape[1]
    return seconds, int((out[:, P:] != tok.pad_token_id).sum()) * K


def vllm_plain_rmod(llm, tok, enc, K, new, seed):
    from vllm import SamplingParams

    from hfx.integrations.vllm import eos_token_ids, generate_token_ids

    prompts = [ids[m.bool()].tolist() for ids, m in zip(enc["input_ids"], enc["attention_mask"])]
    start = time.perf_counter()
    outs = generate_token_ids(llm, prompts, SamplingParams(n=K, temperature=0.8, max_tokens=new, seed=seed,
                                                           stop_token_ids=eos_token_ids(llm), detokenize=False))  # fmt: skip
    seconds = time.perf_counter() - start
    return seconds, sum(len(c.token_ids) for o in outs for c in o.outputs)


def design_b_answer(llm, contexts: list[list[int]], steps: int, eos: list[int]):
    """Design (b): per answer token, K one-token requests with full-vocabulary raw log-probs, averaged outside."""
    import torch
    from vllm import SamplingParams

    from hfx.integrations.vllm import generate_token_ids

    answer: list[int] = []
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=-1, detokenize=False)
    start = time.perf_counter()
    while len(answer) < steps and not (answer and answer[-1] in eos):
        outs = generate_token_ids(llm, [c + answer for c in contexts], params)
        rows = []
        for o in outs:
            lp = o.outputs[0].logprobs[0]
            ids = torch.tensor(list(lp.keys()))
            row = torch.full((int(ids.max()) + 1,), float("-inf"))
            row[ids] = torch.tensor([v.logprob for v in lp.values()])
            rows.append(row)
        width = min(len(r) for r in rows)
        answer.append(int(torch.stack([r[:width] for r in rows]).mean(0).argmax()))
    return answer, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--num-traces", type=int, default=4)
    parser.add_argument("--thinking-tokens", type=int, default=64)
    parser.add_argument("--answer-tokens", type=int, default=24)
    parser.add_argument("--block-size", type=int, default=8)
    parser.add_argument("--rmod-tokens", type=int, default=32)
    parser.add_argument("--hf-python", default=None, help="python of the main hfx environment (HF arms)")
    parser.add_argument("--design-b", action="store_true", help="also time design (b) for the ThinkMerge answer")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vllm_backend.json"))
    parser.add_argument("--hf-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hf_worker:
        hf_worker()
        return

    from hfx.integrations.vllm import load_tokenizer, load_vllm, shutdown_vllm

    hf_python = args.hf_python or (
        str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv").exists() else sys.executable
    )
    start = time.perf_counter()
    engine_kwargs = {"max_logprobs": -1} if args.design_b else {}
    llm = load_vllm(max_model_len=1024, **engine_kwargs)
    engine_start = time.perf_counter() - start
    tok = load_tokenizer()
    questions = _questions(args.prompts)
    enc = _encode(tok, questions)
    worker = HFWorker(hf_python)
    K, budget, answer = args.num_traces, args.thinking_tokens, args.answer_tokens
    # warm-up (first requests compile / allocate)
    vllm_thinkmerge(llm, tok, enc, 2, 8, 4, 0)
    vllm_rmod(llm, tok, enc, 2, 4, 4, 0)
    runs = []
    for r in range(args.rounds):
        seed = 1000 * (r + 1)
        row = {"round": r, "load_before": os.getloadavg()[0]}
        row["tm_vllm_s"], row["tm_vllm_tokens"], out = vllm_thinkmerge(llm, tok, enc, K, budget, answer, seed)
        row["tm_plain_s"], row["tm_plain_tokens"] = vllm_plain_thinkmerge(llm, tok, enc, K, budget, answer, seed)
        hf = worker.run(method="thinkmerge", questions=questions, K=K, budget=budget, answer=answer, seed=seed)
        row["tm_hf_s"], row["tm_hf_tokens"] = hf["seconds"], hf["tokens"]
        row["rmod_vllm_s"], row["rmod_vllm_tokens"] = vllm_rmod(
            llm, tok, enc, K, args.block_size, args.rmod_tokens, seed
        )
        row["rmod_plain_s"], row["rmod_plain_tokens"] = vllm_plain_rmod(llm, tok, enc, K, args.rmod_tokens, seed)
        hf = worker.run(
            method="rmod", questions=questions, K=K, block=args.block_size, new=args.rmod_tokens, seed=seed
        )
        row["rmod_hf_s"], row["rmod_hf_tokens"] = hf["seconds"], hf["tokens"]
        if args.design_b and r == 0:
            prompt = enc["input_ids"][0][enc["attention_mask"][0].bool()].tolist()
            contexts = [prompt + t.tolist() for t in out.traces[0]]
            from hfx.integrations.vllm import eos_token_ids

            b_answer, b_seconds = design_b_answer(llm, contexts, answer, eos_token_ids(llm))
            a_out = vllm_thinkmerge_answer_only(llm, tok, prompt, out.traces[0], answer)
            row["design_b"] = {"seconds": b_seconds, "tokens": len(b_answer), "design_a_seconds": a_out[1],
                               "same_answer_as_design_a": b_answer == a_out[0]}  # fmt: skip
        row["load_after"] = os.getloadavg()[0]
        runs.append(row)
        print(json.dumps(row), flush=True)
    worker.close()
    shutdown_vllm(llm)

    def ratio(key_a, key_b, per_token):
        values = []
        for row in runs:
            if per_token:
                values.append(
                    (row[f"{key_a}_tokens"] / row[f"{key_a}_s"]) / (row[f"{key_b}_tokens"] / row[f"{key_b}_s"])
                )
            else:
                values.append(row[f"{key_a}_s"] / row[f"{key_b}_s"])
        return round(statistics.median(values), 3)

    metrics = {
        "thinkmerge_tokens_per_s_vllm_over_plain_vllm": ratio("tm_vllm", "tm_plain", True),
        "thinkmerge_wall_vllm_over_hf": ratio("tm_vllm", "tm_hf", False),
        "rmod_tokens_per_s_vllm_over_plain_vllm": ratio("rmod_vllm", "rmod_plain", True),
        "rmod_wall_vllm_over_hf": ratio("rmod_vllm", "rmod_hf", False),
    }
    goals = {
        "thinkmerge_tokens_per_s_vllm_over_plain_vllm": ">= 0.8",
        "thinkmerge_wall_vllm_over_hf": "<= 0.5",
        "rmod_tokens_per_s_vllm_over_plain_vllm": ">= 0.8",
        "rmod_wall_vllm_over_hf": "<= 0.5",
    }
    import torch
    import vllm

    result = {
        "metric": "thinkmerge_tokens_per_s_vllm_over_plain_vllm",
        "value": metrics["thinkmerge_tokens_per_s_vllm_over_plain_vllm"],
        "goal": ">= 0.8",
        "metrics": metrics,
        "goals": goals,
        "command": "python benchmarks/vllm_backend.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "detail": {
            "model": "SmolLM2-135M-Instruct (embedded default), fp32",
            "vllm": vllm.__version__,
            "torch": torch.__version__,
            "engine_start_seconds": round(engine_start, 1),
            "settings": {k: v for k, v in vars(args).items() if k not in ("hf_worker", "out")},
            "cpu_count": os.cpu_count(),
            "runs": runs,
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(metrics, indent=2))


def vllm_thinkmerge_answer_only(llm, tok, prompt, traces, answer):
    from hfx.generation.thinkmerge.vllm import thinkmerge_vllm

    start = time.perf_counter()
    out = thinkmerge_vllm(llm, [prompt], num_traces=len(traces), traces=[traces], max_new_tokens=answer,
                          do_sample=False, pad_token_id=tok.pad_token_id)  # fmt: skip
    seconds = time.perf_counter() - start
    from hfx.integrations.vllm import eos_token_ids

    ids, eos = out.sequences[0, len(prompt) :].tolist(), eos_token_ids(llm)
    cut = next((i + 1 for i, t in enumerate(ids) if t in eos), len(ids))
    return ids[:cut], seconds


if __name__ == "__main__":
    main()
