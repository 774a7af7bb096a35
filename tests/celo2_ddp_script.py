"""Run by tests/test_celo2_hf.py: train a tiny float64 LM-shaped model with Celo2 under accelerate, 1 or 2 processes.

Each step uses the same global batch of 8 sequences; with N processes each rank takes 8/N of them, so DDP's gradient
average (gloo) equals the 1-process mean. Writes the world size and the initial / final parameters to
OUT/params_<world>.pt. Plain torch (no transformers import) to keep process start-up short.
"""

import os
import sys

import torch
from accelerate import Accelerator
from torch import nn

from hfx.optim import Celo2, Celo2MetaWeights


class TinyLM(nn.Module):
    def __init__(self, vocab=64, dim=16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.up_proj = nn.Linear(dim, 32)
        self.down_proj = nn.Linear(32, dim)
        self.norm = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        h = self.embed_tokens(ids)
        h = h + self.down_proj(torch.tanh(self.up_proj(h)))
        logits = self.lm_head(self.norm(h))
        return nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


def main(out_dir: str) -> None:
    accelerator = Accelerator(cpu=True)
    world, rank = accelerator.num_processes, accelerator.process_index
    torch.manual_seed(0)
    model = TinyLM().double()
    init = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = Celo2(model.named_parameters(), lr=1e-2, weight_decay=0.01, meta_weights=Celo2MetaWeights(init="adam_like"))
    model, opt = accelerator.prepare(model, opt)
    gen = torch.Generator().manual_seed(0)
    for _ in range(4):
        ids = torch.randint(0, 64, (8, 12), generator=gen)
        loss = model(ids.chunk(world)[rank])
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
    if accelerator.is_main_process:
        params = {n: p.detach().clone() for n, p in accelerator.unwrap_model(model).named_parameters()}
        env_world = int(os.environ.get("WORLD_SIZE", "1"))
        torch.save({"world_size": world, "env_world_size": env_world, "init": init, "params": params},
                   os.path.join(out_dir, f"params_{world}.pt"))  # fmt: skip
    accelerator.wait_for_everyone()
    accelerator.end_training()  # destroys the process group: a gloo teardown at interpreter exit can abort a rank


if __name__ == "__main__":
    main(sys.argv[1])
