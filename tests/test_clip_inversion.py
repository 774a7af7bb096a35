"""CLIP^-1 (arXiv:2505.23161) as a diffusers pipeline: conformance cases of the spec + issue 8 tests.

Everything runs on the tiny random CLIP of ``hfx.testing`` (32 px, patch 8, projection 16) with a tiny INR
(2 hidden layers of 32 units) and a few optimisation steps.
"""

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F


pytest.importorskip("diffusers")

from hfx.pipelines.clip_inversion import (
    CLIPEmbeddingBank,
    CLIPInversionPipeline,
    CLIPInversionPipelineOutput,
    FinerINR,
    INRBank,
    augment_images,
    blend_target,
    cosine_distance,
    finer_activation,
    gaussian_layer_lrs,
    orthogonal_procrustes,
    peak_layer,
    procrustes_align,
)


SIZE = 32
INR_KW = {"inr_hidden_features": 32, "inr_hidden_layers": 2}
FAST = {"height": SIZE, "width": SIZE, "num_augmentations": 2}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    # tiny ops are dominated by thread hand-offs on a shared 2-core machine
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def clip():
    from hfx.testing import tiny_clip

    return tiny_clip(image_size=SIZE)


@pytest.fixture
def pipe(clip):
    model, processor = clip
    pipeline = CLIPInversionPipeline(model, processor, **INR_KW)
    pipeline.set_progress_bar_config(disable=True)
    return pipeline


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def random_bank(d=16, n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return CLIPEmbeddingBank.from_embeddings(torch.randn(n, d, generator=g), torch.randn(n, d, generator=g))


# ---------------------------------------------------------------- conformance 1: FINER activation
def test_finer_activation_alpha_zero_and_detached_gradient():
    z = torch.linspace(-3, 3, 101, dtype=torch.float64, requires_grad=True)
    omega = 30.0
    y = finer_activation(z, omega)
    alpha = z.detach().abs() + 1
    assert torch.all(alpha >= 1)
    torch.testing.assert_close(y.detach(), torch.sin(omega * alpha * z.detach()))
    assert finer_activation(torch.zeros(4), omega).abs().max().item() == 0.0
    (grad,) = torch.autograd.grad(y.sum(), z)
    # reference variant: alpha is a constant for autograd -> d/dz sin(w a z) = w a cos(w a z)
    torch.testing.assert_close(grad, omega * alpha * torch.cos(omega * alpha * z.detach()))
    # without detaching, the product rule adds w * sign(z) * z * cos(...): the two gradients differ
    z2 = z.detach().clone().requires_grad_(True)
    (grad_full,) = torch.autograd.grad(finer_activation(z2, omega, detach_alpha=False).sum(), z2)
    assert not torch.allclose(grad_full, grad)


def test_inr_output_shape_range_and_finer_init():
    inr = FinerINR(hidden_features=64, hidden_layers=3, num_images=2, generator=gen(0))
    assert inr.num_layers == 5
    image = inr.render(12, 20)
    assert image.shape == (2, 3, 12, 20)
    assert image.min() >= 0 and image.max() <= 1
    w0, b0 = inr.layer_parameters(0)
    assert w0.abs().max() <= 1 / 2 and b0.abs().max() <= 20.0 and b0.abs().max() > 10.0  # U(-1/in,1/in), U(-20,20)
    bound = math.sqrt(6 / 64) / 30
    for index in range(1, inr.num_layers):
        assert inr.layer_parameters(index)[0].abs().max() <= bound
    # the two INRs of the batch are independent draws
    assert not torch.equal(image[0], image[1])
    clamp = FinerINR(hidden_features=16, hidden_layers=1, output_activation="clamp", generator=gen(1)).render(8, 8)
    assert clamp.min() >= 0 and clamp.max() <= 1
    flat = inr.flat_parameters()
    other = FinerINR(hidden_features=64, hidden_layers=3, num_images=2, generator=gen(5))
    other.load_flat_parameters(flat)
    torch.testing.assert_close(other.render(12, 20), image)
    with pytest.raises(ValueError, match="output_activation"):
        FinerINR(output_activation="relu")
    with pytest.raises(ValueError, match="flat"):
        other.load_flat_parameters(flat[:, :-1])


# ---------------------------------------------------------------- conformance 2: Procrustes
def test_procrustes_orthogonal_and_recovers_planted_rotation():
    g = torch.Generator().manual_seed(0)
    d, k = 8, 20
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    e_t = torch.randn(d, k, generator=g, dtype=torch.float64)  # full row rank
    r = orthogonal_procrustes(e_t, q @ e_t)
    assert (r.T @ r - torch.eye(d, dtype=r.dtype)).abs().max() < 1e-5
    torch.testing.assert_close(r, q)
    e = torch.randn(d, generator=g, dtype=torch.float64)
    torch.testing.assert_close((r @ e).norm(), e.norm())
    # rank-deficient neighbourhoods (k < d) still give an orthogonal map
    r_small = orthogonal_procrustes(e_t[:, :3].float(), (q @ e_t[:, :3]).float())
    assert (r_small.T @ r_small - torch.eye(d)).abs().max() < 1e-5
    with pytest.raises(ValueError, match="same shape"):
        orthogonal_procrustes(e_t, e_t[:, :3])


def test_procrustes_align_per_prompt_with_planted_rotation():
    g = torch.Generator().manual_seed(1)
    d = 6
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g))
    bank_text = F.normalize(torch.randn(40, d, generator=g), dim=-1)
    prompts = F.normalize(torch.randn(3, d, generator=g), dim=-1)
    targets, rotations = procrustes_align(prompts, bank_text, bank_text @ q.T, k=40)
    assert rotations.shape == (3, d, d)
    torch.testing.assert_close(targets, F.normalize(prompts @ q.T, dim=-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(targets.norm(dim=-1), torch.ones(3))


# ---------------------------------------------------------------- conformance 4: LR schedule
def test_gaussian_lr_sweep_shape_and_values():
    num_layers, steps, peak = 7, 5, 1e-3
    first = gaussian_layer_lrs(0, steps, num_layers, peak)
    last = gaussian_layer_lrs(steps - 1, steps, num_layers, peak)
    assert first.argmax().item() == 0 and last.argmax().item() == num_layers - 1
    assert first[0].item() == pytest.approx(peak) and last[-1].item() == pytest.approx(peak)
    # mid-way the peak is on layer 3: hand-computed Gaussian, symmetric around it
    mid = gaussian_layer_lrs(2, steps, num_layers, peak, sigma=1.0)
    expected = [peak * math.exp(-((layer - 3) ** 2) / 2) for layer in range(num_layers)]
    assert mid.tolist() == pytest.approx(expected)
    for j in range(1, 4):
        assert mid[3 - j].item() == pytest.approx(mid[3 + j].item())
    assert peak_layer(3, 7, 4) == pytest.approx(1.5)
    wide = gaussian_layer_lrs(2, steps, num_layers, peak, sigma=2.0)
    assert wide[0].item() == pytest.approx(peak * math.exp(-9 / 8))
    with pytest.raises(ValueError, match="sigma"):
        gaussian_layer_lrs(0, 5, 3, 1e-3, sigma=0)


def test_pipeline_lr_sweep_moves_from_shallow_to_deep(pipe, monkeypatch):
    seen = []
    original = torch.optim.Adam.step

    def spy(self, *args, **kwargs):
        seen.append([group["lr"] for group in self.param_groups])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    pipe("a photo of a cat", num_inference_steps=6, generator=gen(0), output_type="pt", **FAST)
    peaks = [int(np.argmax(lrs)) for lrs in seen]
    assert len(seen) == 6 and len(seen[0]) == 4  # 2 hidden layers -> 4 linear layers
    assert peaks[0] == 0 and peaks[-1] == 3 and peaks == sorted(peaks)


# ---------------------------------------------------------------- conformance 5: normalised targets, blending
def test_blend_target_unit_norm_weights_and_k1():
    bank = random_bank()
    g = torch.Generator().manual_seed(3)
    queries = F.normalize(torch.randn(4, 16, generator=g), dim=-1)
    anchor, weights = blend_target(queries, bank.image_embeds, k=5, temperature=0.1)
    torch.testing.assert_close(anchor.norm(dim=-1), torch.ones(4))
    torch.testing.assert_close(weights.sum(-1), torch.ones(4))
    # hand-computed softmax over the 5 nearest
    sims = queries @ bank.image_embeds.T
    top = sims.topk(5, dim=-1)
    w = torch.softmax(top.values / 0.1, dim=-1)
    manual = F.normalize(torch.einsum("bk,bkd->bd", w, bank.image_embeds[top.indices]), dim=-1)
    torch.testing.assert_close(anchor, manual)
    one, w1 = blend_target(queries, bank.image_embeds, k=1)
    torch.testing.assert_close(one, bank.image_embeds[sims.argmax(-1)])
    assert torch.all(w1 == 1)


def test_targets_and_image_embeds_are_unit_norm(pipe):
    pipe.set_banks(embedding_bank=random_bank())
    text = pipe.encode_prompt(["a photo of a cat", "hello world"])
    e_t2i = pipe.text_targets(text, procrustes_k=4)
    torch.testing.assert_close(text.norm(dim=-1), torch.ones(2))
    torch.testing.assert_close(e_t2i.norm(dim=-1), torch.ones(2))
    assert not torch.allclose(e_t2i, text)  # the rotation did something
    seen = {}

    def callback(p, step, t, kwargs):
        seen[step] = kwargs
        return {}

    pipe(
        ["a photo of a cat", "hello world"],
        num_inference_steps=2,
        generator=gen(0),
        procrustes_k=4,
        callback_on_step_end=callback,
        callback_on_step_end_tensor_inputs=["image_embeds", "target_embeds", "loss"],
        output_type="pt",
        **FAST,
    )
    torch.testing.assert_close(seen[1]["image_embeds"].norm(dim=-1), torch.ones(2))
    torch.testing.assert_close(seen[1]["target_embeds"], e_t2i)


# ---------------------------------------------------------------- conformance 6: loss sanity
def test_cosine_distance_range_and_zero():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(50, 16, generator=g), torch.randn(50, 16, generator=g)
    dist = cosine_distance(a, b)
    assert torch.all(dist >= 0) and torch.all(dist <= 2)
    assert cosine_distance(a, -a).tolist() == pytest.approx([2.0] * 50, abs=1e-6)
    assert cosine_distance(a, 3 * a).abs().max() < 1e-6


def test_loss_is_zero_when_render_equals_target_image(pipe):
    # the target image is exactly the INR that seed 0 initialises: with augmentation off, the first loss is 0
    image = pipe.make_inr(1, generator=gen(0)).render(SIZE, SIZE).detach()
    out = pipe.reconstruct(
        image, num_inference_steps=1, generator=gen(0), augmentation_strength=0.0, output_type="pt", **FAST
    )
    assert out.loss_history[0, 0] < 1e-5


def test_reconstruction_lowers_loss_and_raises_similarity(pipe):
    target = pipe.make_inr(1, generator=gen(7)).render(SIZE, SIZE).detach()
    target_embed = pipe.encode_image(target, SIZE, SIZE)
    start = pipe.make_inr(1, generator=gen(0)).render(SIZE, SIZE).detach()
    start_sim = F.cosine_similarity(pipe.encode_image(start, SIZE, SIZE), target_embed).item()
    out = pipe.reconstruct(target, num_inference_steps=40, generator=gen(0), learning_rate=2e-3, **FAST)
    losses = out.loss_history[:, 0]
    assert losses[-5:].mean() < losses[:5].mean()
    assert out.clip_similarity[0] > start_sim + 0.05
    assert isinstance(out.images[0], __import__("PIL").Image.Image)


def test_text_to_image_raises_clip_similarity(pipe):
    text = pipe.encode_prompt("a photo of a cat")
    start = pipe.make_inr(1, generator=gen(0)).render(SIZE, SIZE).detach()
    start_sim = F.cosine_similarity(pipe.encode_image(start, SIZE, SIZE), text).item()
    out = pipe("a photo of a cat", num_inference_steps=30, generator=gen(0), learning_rate=2e-3, **FAST)
    assert out.clip_similarity[0] > start_sim + 0.05


# ---------------------------------------------------------------- conformance 3: frozen CLIP
def test_clip_is_frozen_and_only_the_inr_learns(pipe):
    before = {name: p.detach().clone() for name, p in pipe.clip_model.named_parameters()}
    flags = {name: p.requires_grad for name, p in pipe.clip_model.named_parameters()}
    images = []
    pipe(
        "a photo of a cat",
        num_inference_steps=3,
        generator=gen(0),
        callback_on_step_end=lambda p, i, t, kw: images.append(kw["image"]) or {},
        callback_on_step_end_tensor_inputs=["image"],
        **FAST,
    )
    for name, param in pipe.clip_model.named_parameters():
        assert torch.equal(param, before[name]), name
        assert param.grad is None, name
        assert param.requires_grad == flags[name]
    assert not torch.equal(images[0], images[-1])  # the INR parameters did move
    # no generator / decoder: every parameter the pipeline holds belongs to CLIP (no banks attached)
    held = sum(
        p.numel()
        for module in pipe.components.values()
        if isinstance(module, torch.nn.Module)
        for p in module.parameters()
    )
    assert held == sum(p.numel() for p in pipe.clip_model.parameters())


# ---------------------------------------------------------------- conformance 7: plain mode
def test_plain_mode_is_direct_embedding_matching(pipe):
    steps, n = 3, 2
    out = pipe("a photo of a cat", num_inference_steps=steps, generator=gen(0), output_type="pt", **FAST)
    # reference loop: FINER INR + Gaussian sweep + augmentation-averaged cosine distance to the text embedding
    g = gen(0)
    target = pipe.encode_prompt("a photo of a cat")
    inr = pipe.make_inr(1, generator=g)
    opt = torch.optim.Adam([{"params": inr.layer_parameters(i)} for i in range(inr.num_layers)])
    for step in range(steps):
        for group, lr in zip(opt.param_groups, gaussian_layer_lrs(step, steps, inr.num_layers, 5e-4).tolist()):
            group["lr"] = lr
        views = augment_images(inr.render(SIZE, SIZE), n, SIZE, generator=g)
        embeds = F.normalize(pipe.embed_pixels(views).view(1, n, -1).mean(1), dim=-1)
        loss = (1 - F.cosine_similarity(embeds, target)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.testing.assert_close(out.images, inr.render(SIZE, SIZE).detach(), atol=1e-5, rtol=0)
    # a bank that is switched off (R = I, beta = 0, random init) changes nothing
    pipe.set_banks(embedding_bank=random_bank())
    off = pipe(
        "a photo of a cat",
        num_inference_steps=steps,
        generator=gen(0),
        use_procrustes=False,
        blend_weight=0.0,
        output_type="pt",
        **FAST,
    )
    torch.testing.assert_close(off.images, out.images)
    on = pipe(
        "a photo of a cat", num_inference_steps=steps, generator=gen(0), procrustes_k=4, output_type="pt", **FAST
    )
    assert not torch.allclose(on.images, out.images)


# ---------------------------------------------------------------- reproducibility, outputs, callbacks
def test_same_seed_same_image_and_output_types(pipe):
    a = pipe("a photo of a cat", num_inference_steps=3, generator=gen(3), output_type="np", **FAST)
    b = pipe("a photo of a cat", num_inference_steps=3, generator=gen(3), output_type="np", **FAST)
    c = pipe("a photo of a cat", num_inference_steps=3, generator=gen(4), output_type="np", **FAST)
    assert isinstance(a, CLIPInversionPipelineOutput)
    assert a.images.shape == (1, SIZE, SIZE, 3) and a.images.dtype == np.float32
    np.testing.assert_array_equal(a.images, b.images)
    assert not np.allclose(a.images, c.images)
    pt = pipe(
        ["cat", "dog"],
        num_inference_steps=1,
        num_images_per_prompt=2,
        generator=gen(0),
        output_type="pt",
        height=16,
        width=24,
        num_augmentations=1,
    )
    assert pt.images.shape == (4, 3, 16, 24) and pt.clip_similarity.shape == (4,) and pt.loss_history.shape == (1, 4)
    images, sims = pipe("cat", num_inference_steps=1, generator=gen(0), return_dict=False, **FAST)
    assert images[0].size == (SIZE, SIZE) and sims.shape == (1,)


def test_callback_interrupt_and_target_replacement(pipe):
    calls = []

    def stop_after_two(p, step, t, kwargs):
        calls.append(step)
        if step == 1:
            p._interrupt = True
        return {}

    out = pipe("cat", num_inference_steps=10, generator=gen(0), callback_on_step_end=stop_after_two, **FAST)
    assert calls == [0, 1] and out.loss_history.shape == (2, 1)
    other = pipe.encode_prompt("dog")
    seen = []

    def swap(p, step, t, kwargs):
        seen.append(kwargs["target_embeds"])
        return {"target_embeds": other}

    pipe(
        "cat",
        num_inference_steps=3,
        generator=gen(0),
        callback_on_step_end=swap,
        callback_on_step_end_tensor_inputs=["target_embeds"],
        **FAST,
    )
    torch.testing.assert_close(seen[-1], other)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"height": 0}, "height"),
        ({"width": -4}, "width"),
        ({"height": 2.5}, "height"),
        ({"num_inference_steps": 0}, "num_inference_steps"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "   "}, "prompt"),
        ({"prompt": ["ok", ""]}, "prompt"),
        ({"prompt": []}, "prompt"),
        ({"prompt": None}, "prompt"),
        ({"output_type": "latent"}, "output_type"),
        ({"num_augmentations": 0}, "num_augmentations"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"blend_weight": -1.0}, "blend_weight"),
        ({"callback_on_step_end_tensor_inputs": ["latents"]}, "callback_on_step_end_tensor_inputs"),
        ({"prompt_embeds": torch.zeros(1, 3)}, "prompt_embeds"),
    ],
)
def test_bad_inputs_raise_value_error(pipe, kwargs, match):
    call = {"prompt": "a cat", "num_inference_steps": 1, **FAST}
    call.update(kwargs)
    if "prompt_embeds" in kwargs:
        call["prompt"] = None
    with pytest.raises(ValueError, match=match):
        pipe(**call)


def test_bad_types_and_bank_dims(pipe, clip):
    with pytest.raises(TypeError, match="prompt"):
        pipe(prompt=3, num_inference_steps=1, **FAST)
    with pytest.raises(TypeError, match="generator"):
        pipe("cat", num_inference_steps=1, generator=[gen(0)], **FAST)
    with pytest.raises(ValueError, match="embed_dim"):
        pipe.set_banks(embedding_bank=random_bank(d=8))
    model, processor = clip
    with pytest.raises(ValueError, match="embedding_bank"):
        CLIPInversionPipeline(model, processor, embedding_bank=random_bank(d=32), **INR_KW)
    wrong_dim = INRBank(num_entries=2, embed_dim=8, num_parameters=10, inr_config=pipe.inr_config())
    with pytest.raises(ValueError, match="inr_bank"):
        pipe.set_banks(inr_bank=wrong_dim)
    wrong_arch = INRBank(num_entries=2, embed_dim=16, num_parameters=10, inr_config={"hidden_features": 8})
    with pytest.raises(ValueError, match="INR config"):
        pipe.set_banks(inr_bank=wrong_arch)
    with pytest.raises(ValueError, match="content_weight"):
        pipe.stylize(torch.rand(1, 3, SIZE, SIZE), "cat", content_weight=-1, **FAST)


# ---------------------------------------------------------------- banks, stylize
def test_inr_bank_initialisation_and_stylize(pipe):
    g = torch.Generator().manual_seed(0)
    images = torch.rand(2, 3, 16, 16, generator=g)
    bank = pipe.build_inr_bank(images, height=16, width=16, num_steps=5, generator=gen(1))
    assert bank.inr_parameters.shape[0] == 2 and bank.config.inr_config == pipe.inr_config()
    torch.testing.assert_close(bank.key_embeds.norm(dim=-1), torch.ones(2))
    pipe.set_banks(inr_bank=bank)
    # reconstruct image 1 with zero learning-rate steps -> the render is bank entry 1's INR
    seen = []
    pipe.reconstruct(
        images[1:],
        num_inference_steps=1,
        generator=gen(0),
        learning_rate=1e-12,
        output_type="pt",
        callback_on_step_end=lambda p, i, t, kw: seen.append(kw["image"]) or {},
        callback_on_step_end_tensor_inputs=["image"],
        **FAST,
    )
    ref = pipe.make_inr(1)
    ref.load_flat_parameters(bank.inr_parameters[1:2])
    torch.testing.assert_close(seen[0], ref.render(SIZE, SIZE).detach())
    content = torch.rand(1, 3, SIZE, SIZE, generator=g)
    out = pipe.stylize(
        content,
        "a photo of a cat",
        init_fit_steps=3,
        num_inference_steps=2,
        generator=gen(0),
        output_type="pt",
        **FAST,
    )
    assert out.images.shape == (1, 3, SIZE, SIZE)


# ---------------------------------------------------------------- save / load
def _all_banks(pipe):
    pipe.set_banks(embedding_bank=random_bank())
    images = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    pipe.set_banks(inr_bank=pipe.build_inr_bank(images, height=16, width=16, num_steps=2, generator=gen(1)))
    return pipe


def test_save_load_round_trip_same_image(pipe, tmp_path):
    _all_banks(pipe)
    call = {"prompt": "a photo of a cat", "num_inference_steps": 3, "procrustes_k": 4, "output_type": "pt", **FAST}
    ref = pipe(generator=gen(0), **call)
    pipe.save_pretrained(tmp_path / "pipe")
    index = json.loads((tmp_path / "pipe" / "model_index.json").read_text())
    assert index["_class_name"] == ["pipeline_clip_inversion", "CLIPInversionPipeline"]
    assert index["embedding_bank"] == ["banks", "CLIPEmbeddingBank"] and index["inr_bank"] == ["banks", "INRBank"]
    assert index["inr_hidden_features"] == 32
    for name in ("pipeline_clip_inversion.py", "inr.py", "banks.py", "embedding_bank/banks.py"):
        assert (tmp_path / "pipe" / name).is_file(), name
    loaded = CLIPInversionPipeline.from_pretrained(tmp_path / "pipe")
    loaded.set_progress_bar_config(disable=True)
    assert loaded.config.inr_hidden_layers == 2
    torch.testing.assert_close(loaded.embedding_bank.image_embeds, pipe.embedding_bank.image_embeds, rtol=0, atol=0)
    out = loaded(generator=gen(0), **call)
    torch.testing.assert_close(out.images, ref.images, rtol=0, atol=0)
    # and through the Hub-cache layout, offline
    from hfx.hub import add_to_hf_cache

    add_to_hf_cache(tmp_path / "pipe", "hfx/clip-inversion-tiny", cache_dir=tmp_path / "cache")
    cached = CLIPInversionPipeline.from_pretrained("hfx/clip-inversion-tiny", cache_dir=tmp_path / "cache")
    cached.set_progress_bar_config(disable=True)
    torch.testing.assert_close(cached(generator=gen(0), **call).images, ref.images, rtol=0, atol=0)
    with pytest.raises(ValueError, match="Unknown keyword"):
        CLIPInversionPipeline.from_pretrained(tmp_path / "pipe", not_an_option=1)


def test_diffusion_pipeline_loads_saved_folder_with_trust_remote_code(pipe, tmp_path):
    from diffusers import DiffusionPipeline

    _all_banks(pipe)
    call = {"prompt": "a photo of a cat", "num_inference_steps": 2, "procrustes_k": 4, "output_type": "np", **FAST}
    ref = pipe(generator=gen(0), **call).images
    folder = tmp_path / "pipe"
    pipe.save_pretrained(folder)
    np.save(tmp_path / "ref.npy", ref)
    with pytest.raises(ValueError, match="trust_remote_code"):
        DiffusionPipeline.from_pretrained(folder)
    # in a fresh process with its own modules cache: plain diffusers, the class resolved from the folder's code
    script = textwrap.dedent(
        f"""
        import numpy as np, torch
        from diffusers import DiffusionPipeline
        pipe = DiffusionPipeline.from_pretrained({str(folder)!r}, trust_remote_code=True)
        assert type(pipe).__module__.startswith("diffusers_modules"), type(pipe).__module__
        assert type(pipe.inr_bank).__name__ == "INRBank"
        pipe.set_progress_bar_config(disable=True)
        torch.set_num_threads(1)
        out = pipe("a photo of a cat", num_inference_steps=2, procrustes_k=4, output_type="np", height={SIZE},
                   width={SIZE}, num_augmentations=2, generator=torch.Generator().manual_seed(0))
        np.testing.assert_array_equal(out.images, np.load({str(tmp_path / "ref.npy")!r}))
        half = DiffusionPipeline.from_pretrained({str(folder)!r}, trust_remote_code=True, dtype=torch.bfloat16)
        assert half.clip_model.dtype == torch.bfloat16, half.clip_model.dtype
        for bank in (half.inr_bank, half.embedding_bank):  # issue 11: banks stay float32
            for name, tensor in bank.state_dict().items():
                assert tensor.dtype == torch.float32 and torch.equal(tensor, getattr(pipe, bank_name(bank)).state_dict()[name])
        print("OK")
        """
    ).replace("bank_name(bank)", "('inr_bank' if type(bank).__name__ == 'INRBank' else 'embedding_bank')")
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-3000:]
    assert "Expected types for" not in result.stderr, result.stderr[-3000:]  # issue 11: no spurious type warnings


# ---------------------------------------------------------------- publish + CLI
def test_publish_writes_loadable_folder_with_card(tmp_path):
    from hfx.hub import publish

    out = publish("clip-inversion", tmp_path / "pub", **INR_KW)
    card = (out / "README.md").read_text()
    assert card.startswith("---") and "arxiv:2505.23161" in card and "trust_remote_code=True" in card
    assert "library_name: diffusers" in card
    loaded = CLIPInversionPipeline.from_pretrained(out)
    assert loaded.config.inr_hidden_features == 32


def test_cli_synthesize_tiny(tmp_path, capsys):
    from hfx.cli import main

    target = tmp_path / "apple.png"
    code = main(
        [
            "synthesize",
            "a red apple on a table",
            "--steps",
            "2",
            "--out",
            str(target),
            "--height",
            "24",
            "--width",
            "24",
            "--seed",
            "0",
            "--num-augmentations",
            "1",
        ]
    )
    assert code == 0 and target.is_file()
    from PIL import Image

    assert Image.open(target).size == (24, 24)
    captured = capsys.readouterr()
    assert "tiny random CLIP" in captured.out + captured.err
    assert main(["synthesize", "", "--steps", "2", "--out", str(target)]) == 2


# ---------------------------------------------------------------- issue 11, item 10: inputs, dtypes, per-image init
def test_banks_stay_float32_when_the_pipeline_is_cast_or_loaded_in_bfloat16(pipe, tmp_path):
    _all_banks(pipe)
    before = {n: pipe.inr_bank.state_dict()[n].clone() for n in pipe.inr_bank.state_dict()}
    pipe.inr_bank.save_pretrained(tmp_path / "inr_bank")
    pipe.to(torch.bfloat16)
    try:
        assert pipe.clip_model.dtype == torch.bfloat16
        for bank in (pipe.inr_bank, pipe.embedding_bank):
            assert all(t.dtype == torch.float32 for t in bank.state_dict().values())
        assert all(torch.equal(pipe.inr_bank.state_dict()[n], t) for n, t in before.items())
        loaded = INRBank.from_pretrained(tmp_path / "inr_bank", torch_dtype=torch.bfloat16)
        assert all(torch.equal(loaded.state_dict()[n], t) for n, t in before.items())
        loaded.half().bfloat16().double()  # every nn.Module cast goes through `_apply`
        assert all(torch.equal(loaded.state_dict()[n], t) for n, t in before.items())
        # the robust init is the stored fp32 INR, bit for bit, with a bf16 CLIP
        seen = []
        keep = lambda p, i, t, kw: seen.append(kw["image"]) or {}  # noqa: E731
        pipe.reconstruct(
            torch.rand(1, 3, SIZE, SIZE, generator=gen(5)),
            num_inference_steps=1,
            learning_rate=1e-12,
            generator=gen(0),
            callback_on_step_end=keep,
            callback_on_step_end_tensor_inputs=["image"],
            output_type="pt",
            **FAST,
        )
        entries = [pipe.make_inr(1) for _ in range(2)]
        for k, inr in enumerate(entries):
            inr.load_flat_parameters(before["inr_parameters"][k : k + 1])
        assert any(torch.equal(seen[0], inr.render(SIZE, SIZE).detach()) for inr in entries)
    finally:
        pipe.to(torch.float32)


def test_integer_and_float_images_follow_one_rule(pipe):
    pixels = torch.randint(0, 256, (2, 3, 8, 8), generator=gen(0), dtype=torch.uint8)
    expected = pixels.float() / 255
    from_tensor = pipe.images_to_tensor(pixels, 8, 8)
    from_array = pipe.images_to_tensor(pixels.permute(0, 2, 3, 1).numpy(), 8, 8)
    torch.testing.assert_close(from_tensor, expected, rtol=0, atol=0)  # was clamped to white before issue 11
    torch.testing.assert_close(from_array, expected, rtol=0, atol=0)
    torch.testing.assert_close(pipe.images_to_tensor(pixels.long(), 8, 8), expected, rtol=0, atol=0)
    torch.testing.assert_close(pipe.images_to_tensor(expected.numpy().transpose(0, 2, 3, 1), 8, 8), expected)
    with pytest.raises(ValueError, match=r"float `image` values have to lie in \[0, 1\]"):
        pipe.images_to_tensor(pixels.float(), 8, 8)
    with pytest.raises(ValueError, match=r"float `image` values have to lie in \[0, 1\]"):
        pipe.images_to_tensor(pixels.permute(0, 2, 3, 1).numpy().astype(np.float32), 8, 8)
    with pytest.raises(ValueError, match="NaN"):
        pipe.reconstruct(torch.full((1, 3, 8, 8), float("nan")), num_inference_steps=1, **FAST)
    with pytest.raises(ValueError, match="0-255"):
        pipe.images_to_tensor(torch.full((1, 3, 4, 4), 300), 4, 4)
    with pytest.raises(TypeError, match="integers"):
        pipe.images_to_tensor(torch.ones(1, 3, 4, 4, dtype=torch.bool), 4, 4)


def test_integer_likes_accepted_and_nan_inf_rejected(pipe):
    call = {"prompt": "a photo of a cat", "generator": gen(1), "output_type": "np"}
    lr = float(np.float32(5e-4))
    ref = pipe(num_inference_steps=2, height=SIZE, width=SIZE, num_augmentations=2, learning_rate=lr, **call)
    call["generator"] = gen(1)
    out = pipe(
        num_inference_steps=np.int64(2),
        height=np.int32(SIZE),
        width=torch.tensor(SIZE),
        num_augmentations=np.uint8(2),
        learning_rate=np.float32(5e-4),
        **call,
    )
    np.testing.assert_array_equal(out.images, ref.images)
    embeds = pipe.encode_prompt(["a cat", "a dog"])
    embeds[1, 3] = float("nan")
    for kwargs, match in (
        ({"prompt_embeds": embeds}, r"`prompt_embeds` has to be finite, but row\(s\) \[1\]"),
        ({"prompt": "cat", "learning_rate": float("inf")}, "`learning_rate` has to be a finite float"),
        ({"prompt": "cat", "learning_rate": float("nan")}, "`learning_rate` has to be a finite float"),
        ({"prompt": "cat", "blend_weight": float("inf")}, "`blend_weight`"),
        ({"prompt": "cat", "num_inference_steps": 2.0}, "`num_inference_steps` has to be an integer"),
        ({"prompt": "cat", "num_images_per_prompt": True}, "`num_images_per_prompt` has to be an integer"),
        ({"prompt": "cat", "inr_bank_init": "random"}, "`inr_bank_init`"),
    ):
        with pytest.raises(ValueError, match=match):
            pipe(**{"num_inference_steps": 1, **FAST, **kwargs})
    with pytest.raises(TypeError, match="`learning_rate`"):
        pipe("cat", num_inference_steps=1, learning_rate="5e-4", **FAST)
    with pytest.raises(ValueError, match="`init_fit_steps`"):
        pipe.stylize(torch.rand(1, 3, 8, 8), "cat", init_fit_steps=-1, **FAST)


def test_each_image_of_a_prompt_starts_from_its_own_bank_inr(pipe):
    images = torch.rand(3, 3, 16, 16, generator=gen(7))
    pipe.set_banks(inr_bank=pipe.build_inr_bank(images, height=16, width=16, num_steps=2, generator=gen(1)))
    target = pipe.encode_prompt("a photo of a cat")
    order = torch.argsort(F.cosine_similarity(target, pipe.inr_bank.key_embeds), descending=True)  # nearest first

    def first_renders(**kwargs):
        seen = []
        pipe(
            "a photo of a cat",
            num_images_per_prompt=4,
            num_inference_steps=1,
            learning_rate=1e-12,
            generator=gen(0),
            output_type="pt",
            callback_on_step_end=lambda p, i, t, kw: seen.append(kw["image"]) or {},
            callback_on_step_end_tensor_inputs=["image"],
            **FAST,
            **kwargs,
        )
        return seen[0]

    def bank_render(entry):
        inr = pipe.make_inr(1)
        inr.load_flat_parameters(pipe.inr_bank.inr_parameters[entry : entry + 1])
        return inr.render(SIZE, SIZE).detach()[0]

    per_image = first_renders()  # default: image j starts from the (j mod 3)-th nearest INR
    for j, entry in enumerate([order[0], order[1], order[2], order[0]]):
        torch.testing.assert_close(per_image[j], bank_render(int(entry)), rtol=0, atol=0)
    nearest = first_renders(inr_bank_init="nearest")  # the rule before issue 11
    for j in range(4):
        torch.testing.assert_close(nearest[j], bank_render(int(order[0])), rtol=0, atol=0)


# ---------------------------------------------------------------- issue 11, item 11: exact speed-ups, options
def _reference_inr(inr, coords):
    """The INR before issue 11, written out: expand + baddbmm per layer, FINER with alpha detached by autograd."""
    x = coords.unsqueeze(0).expand(inr.num_images, -1, -1)
    for index, (weight, bias) in enumerate(zip(inr.weights, inr.biases)):
        x = torch.baddbmm(bias, x, weight)
        if index < inr.num_layers - 1:
            x = torch.sin(inr.omega * (x.abs() + 1).detach() * x)
    return torch.sigmoid(x)


@pytest.mark.parametrize("num_images", [1, 3])
def test_fused_inr_values_and_gradients_equal_the_reference_formula(monkeypatch, num_images):
    from hfx.pipelines.clip_inversion import inr as inr_module
    from hfx.pipelines.clip_inversion.inr import coordinate_grid

    monkeypatch.setattr(inr_module, "FINER_CHUNK_ROWS", 256)  # 1600 points -> 7 blocks, a ragged last one
    inr = FinerINR(hidden_features=24, hidden_layers=3, num_images=num_images, generator=gen(0)).double()
    coords = coordinate_grid(40, 40, dtype=torch.float64).requires_grad_(True)  # shared by the images: grads sum
    target = torch.rand(num_images, 1600, 3, generator=gen(1), dtype=torch.float64)
    inr.weights[2].requires_grad_(False)  # a layer without gradient: its weight GEMM is skipped, the rest unchanged
    params = [coords] + [p for p in inr.parameters() if p.requires_grad]
    out, ref = inr(coords), _reference_inr(inr, coords)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # the no-grad path skips dy/dz but renders the same values
        assert torch.equal(inr(coords), out)
    grads = torch.autograd.grad(((out - target) ** 2).sum(), params)
    ref_grads = torch.autograd.grad(((ref - target) ** 2).sum(), params)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-8, atol=1e-9)
    # (float64: in float32 the first layer's large frequencies (|omega alpha z| up to ~1e4 rad) amplify any
    # one-ulp GEMM rounding difference, between any two BLAS kernels, into ~1e-2 gradient differences)


def _capture_inr(pipe, monkeypatch):
    created, make = [], pipe.make_inr
    monkeypatch.setattr(pipe, "make_inr", lambda *a, **k: created.append(make(*a, **k)) or created[-1])
    return created


def test_min_layer_lr_ratio_gives_no_gradient_to_far_layers(pipe, monkeypatch):
    init = [p.detach().clone() for p in pipe.make_inr(1, generator=gen(0)).parameters()]
    created = _capture_inr(pipe, monkeypatch)
    # 4 INR layers; one step peaks on layer 0: lr ratios 1, 0.61, 0.135, 0.011 -> only layer 3 is below 0.05
    pipe("a cat", num_inference_steps=1, learning_rate=1e-2, min_layer_lr_ratio=0.05, generator=gen(0), **FAST)
    pipe("a cat", num_inference_steps=1, learning_rate=1e-2, generator=gen(0), **FAST)  # default: every layer
    for inr, frozen in zip(created, ({3}, set())):
        weights = [w.detach() for w in inr.weights]
        assert all(p.requires_grad for p in inr.parameters())  # restored after the run
        for index, weight in enumerate(weights):
            assert torch.equal(weight, init[index]) == (index in frozen), index
    with pytest.raises(ValueError, match="`min_layer_lr_ratio` has to lie in"):
        pipe("a cat", num_inference_steps=1, min_layer_lr_ratio=1.0, **FAST)


def test_coarse_grid_factor_optimises_a_jittered_coarse_grid_and_renders_full_size(pipe, monkeypatch):
    created = _capture_inr(pipe, monkeypatch)
    seen = []
    out = pipe(
        "a cat",
        num_inference_steps=2,
        learning_rate=1e-12,
        coarse_grid_factor=2,
        generator=gen(0),
        output_type="pt",
        callback_on_step_end=lambda p, i, t, kw: seen.append(kw["image"]) or {},
        callback_on_step_end_tensor_inputs=["image"],
        **FAST,
    )
    assert [tuple(s.shape) for s in seen] == [(1, 3, SIZE // 2, SIZE // 2)] * 2  # what CLIP saw (upsampled)
    assert (seen[0] - seen[1]).abs().max() > 1e-3  # a new sub-pixel offset each step (the INR barely moved)
    unjittered = created[0].render(SIZE // 2, SIZE // 2).detach()
    assert not torch.allclose(seen[0], unjittered, atol=1e-3)
    torch.testing.assert_close(out.images, created[0].render(SIZE, SIZE).detach(), rtol=0, atol=1e-6)  # full size
    with pytest.raises(ValueError, match="`coarse_grid_factor` has to be an integer >= 1"):
        pipe("a cat", num_inference_steps=1, coarse_grid_factor=0, **FAST)
