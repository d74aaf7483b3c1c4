"""rg.AdamW (torch.optim.AdamW: decoupled weight decay, Loshchilov & Hutter 2019): the NumPy
update against torch.optim.AdamW on the CPU, its config round trip and bad arguments, the device
kernel (library.adam_update with ``decay``) and the CUDA backend in numba's simulator where no GPU
is present, and ``rnngraph train --optimizer adamw --weight-decay WD``.
"""
import os
import shutil

if not shutil.which("nvidia-smi"):  # no GPU: the simulator (as conftest.py does; either suffices)
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # before numba.cuda is first imported

import json  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402

import rnngraph as rg  # noqa: E402
from rnngraph import cli, optim  # noqa: E402
from rnngraph.cli.train import _Trainer  # noqa: E402
from rnngraph.cli.train_config import _config_from_args  # noqa: E402
from rnngraph.codegen import device, library  # noqa: E402
from rnngraph.lm import load_checkpoint, make_optimizer  # noqa: E402

needs_cuda = pytest.mark.skipif(not device.in_simulator() and not cuda.is_available(),
                                reason="numba.cuda was imported without the simulator and no GPU is present")

SHAPES = [(3, 4), (7,), (2, 3, 5)]
HYPER = dict(lr=0.05, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.5)  # shrink 2.5% a step: far above 1e-6


def _problem(dtype, steps=5, seed=0):
    """Parameters of magnitude 0.5..2 (so a relative tolerance means something) and random gradients."""
    rng = np.random.default_rng(seed)
    params = {f"p{i}": (rng.choice([-1, 1], s) * rng.uniform(0.5, 2.0, s)).astype(dtype)
              for i, s in enumerate(SHAPES)}
    grads = [{k: rng.standard_normal(p.shape).astype(dtype) for k, p in params.items()} for _ in range(steps)]
    return params, grads


def _numpy_run(opt, params, grads):
    params = {k: p.copy() for k, p in params.items()}
    for g in grads:
        opt.step(params, {k: v.copy() for k, v in g.items()})
    return params


# ---- NumPy against torch.optim.AdamW ----------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numpy_adamw_matches_torch_adamw(dtype):
    torch = pytest.importorskip("torch")
    params, grads = _problem(dtype)
    ours = _numpy_run(optim.AdamW(**HYPER), params, grads)
    tparams = {k: torch.tensor(p.copy(), requires_grad=True) for k, p in params.items()}
    topt = torch.optim.AdamW(list(tparams.values()), **HYPER)
    for g in grads:
        for k, t in tparams.items():
            t.grad = torch.tensor(g[k].copy())
        topt.step()
    for k, t in tparams.items():
        want = t.detach().numpy()
        assert ours[k].dtype == want.dtype == dtype
        np.testing.assert_allclose(ours[k], want, rtol=1e-6, atol=0, err_msg=k)
    # the decay is really there: plain Adam lands elsewhere
    adam = _numpy_run(optim.Adam(HYPER["lr"], HYPER["betas"], HYPER["eps"]), params, grads)
    assert all(not np.allclose(adam[k], ours[k], rtol=1e-3, atol=0) for k in ours)


def test_adamw_without_decay_is_adam_bit_for_bit():
    params, grads = _problem(np.float32, steps=3, seed=1)
    a = _numpy_run(optim.AdamW(lr=1e-2, weight_decay=0.0), params, grads)
    b = _numpy_run(optim.Adam(lr=1e-2), params, grads)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


# ---- config, from_config, state, errors ---------------------------------------------------------
def test_adamw_config_round_trip():
    opt = rg.AdamW(lr=3e-3, betas=(0.85, 0.995), eps=1e-7, weight_decay=0.05)
    cfg = json.loads(json.dumps(opt.config()))  # as a checkpoint's config.json stores it
    assert cfg == {"name": "adamw", "lr": 3e-3, "betas": [0.85, 0.995], "eps": 1e-7, "weight_decay": 0.05}
    back = optim.from_config(cfg)
    assert type(back) is optim.AdamW and back.config() == cfg
    assert optim.AdamW().weight_decay == 0.01 and optim.from_config({"name": "adamw", "lr": 1e-3}).weight_decay == 0.01
    # slots and step count carry over: the rebuilt optimizer continues the same trajectory
    params, grads = _problem(np.float64, steps=3, seed=2)
    p1 = _numpy_run(opt, params, grads[:2])
    back.load_state_dict(opt.state_dict())
    p2 = {k: v.copy() for k, v in p1.items()}
    opt.step(p1, grads[2])
    back.step(p2, grads[2])
    assert back.steps == opt.steps == 3 and sorted(back.slots) == sorted(opt.slots)
    for k in p1:
        np.testing.assert_array_equal(p2[k], p1[k], err_msg=k)


def test_exported_and_listed():
    assert rg.AdamW is optim.AdamW and "AdamW" in rg.__all__ and issubclass(rg.AdamW, rg.Adam)
    with pytest.raises(ValueError, match=r"\(adam, adamw, sgd\)"):
        optim.from_config({"name": "lamb", "lr": 1e-3})


@pytest.mark.parametrize("wd", [-0.1, float("nan"), float("inf"), "0.1", None])
def test_bad_weight_decay(wd):
    with pytest.raises(ValueError, match="AdamW: weight_decay"):
        optim.AdamW(lr=1e-3, weight_decay=wd)


def test_make_optimizer():
    assert make_optimizer("adamw", 0.01).config()["weight_decay"] == 0.01
    assert make_optimizer("adamw", 0.01, 0.2).config()["weight_decay"] == 0.2
    for name in ("adam", "sgd"):
        with pytest.raises(ValueError, match="adamw only"):
            make_optimizer(name, 0.01, 0.1)
    with pytest.raises(ValueError, match=r"\(adam, adamw, sgd\)"):
        make_optimizer("lamb", 0.01)


# ---- the device kernel and the CUDA backend ----------------------------------------------------
@needs_cuda
def test_adam_update_kernel_with_decay():
    rng = np.random.default_rng(3)
    p0 = rng.uniform(0.5, 2.0, (2, 5)).astype(np.float32)
    grads = [rng.standard_normal((2, 5)).astype(np.float32) for _ in range(4)]
    lr, wd = 0.01, 0.5
    p, m, v = (cuda.to_device(a) for a in (p0.copy(), np.zeros_like(p0), np.zeros_like(p0)))
    q, mq, vq = (cuda.to_device(a) for a in (p0.copy(), np.zeros_like(p0), np.zeros_like(p0)))
    for step, g in enumerate(grads, start=1):
        library.adam_update(p, cuda.to_device(g), m, v, lr=lr, beta1=0.8, beta2=0.99, eps=1e-6, step=step,
                            decay=1 - lr * wd)
        library.adam_update(q, cuda.to_device(g), mq, vq, lr=lr, beta1=0.8, beta2=0.99, eps=1e-6, step=step)
    want = _numpy_run(optim.AdamW(lr=lr, betas=(0.8, 0.99), eps=1e-6, weight_decay=wd), {"w": p0},
                      [{"w": g} for g in grads])["w"]
    np.testing.assert_allclose(p.copy_to_host(), want, rtol=1e-5, atol=1e-6)
    adam = _numpy_run(optim.Adam(lr=lr, betas=(0.8, 0.99), eps=1e-6), {"w": p0}, [{"w": g} for g in grads])["w"]
    np.testing.assert_allclose(q.copy_to_host(), adam, rtol=1e-5, atol=1e-6)  # decay defaults to 1: Adam
    assert not np.allclose(want, adam, rtol=1e-3, atol=0)


@needs_cuda
def test_cuda_backend_runs_adamw_like_the_numpy_backend():
    V, T, S, H = 5, 2, 2, 4
    net = rg.stacked(rg.cells.elman, 1, H, vocab=V, embed=3)
    mk = lambda dev: rg.compile(net, window=T, streams=S, device=dev, seed=1,  # noqa: E731
                                optimizer=rg.AdamW(lr=0.05, weight_decay=0.5))
    cpu, gpu = mk("cpu"), mk("cuda")
    start = {k: v.copy() for k, v in cpu.parameters.items()}
    rng = np.random.default_rng(4)
    x, y = rng.integers(0, V, (T, S)), rng.integers(0, V, (T, S))
    assert gpu.train(x, y) == pytest.approx(cpu.train(x, y), abs=1e-5)
    pc, pg = cpu.parameters, gpu.parameters
    for name in pc:
        np.testing.assert_allclose(pg[name], pc[name], rtol=1e-5, atol=1e-6, err_msg=name)
    # one step from the same start: AdamW's parameters are Adam's minus lr*wd*start (the decay)
    plain = rg.compile(net, window=T, streams=S, device="cpu", seed=1, optimizer=rg.Adam(lr=0.05))
    plain.train(x, y)
    for name in pg:
        np.testing.assert_allclose(pg[name] - plain.parameters[name], -0.05 * 0.5 * start[name], atol=1e-5,
                                   err_msg=name)
    slots = gpu.optimizer.state_dict()
    assert {k.split("/")[0] for k in slots if k != "steps"} == {"m", "v"}


# ---- the command line ---------------------------------------------------------------------------
TINY = ["--hidden", "8", "--embed", "4", "--window", "8", "--streams", "4", "--lr", "0.01",
        "--device", "cpu", "--no-progress", "--eval-streams", "4", "--eval-every", "3"]


def _main(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _train(capsys, text_file, ckpt, *extra, steps=6):
    return _main(capsys, "train", "--corpus", text_file, *TINY, "--steps", steps, "--checkpoint", ckpt, *extra)


def _one_line_error(code, err, *needles, exit_code):
    assert code == exit_code, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rnngraph: error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_cli_trains_adamw_and_resumes_with_its_weight_decay(capsys, tmp_path, text_file):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    code, out, err = _train(capsys, text_file, straight, "--optimizer", "adamw", "--weight-decay", 0.1)
    assert code == 0, err
    assert "adamw lr 0.01, weight decay 0.1, clip" in out
    ck = load_checkpoint(straight)
    assert ck.config.optimizer == {"name": "adamw", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8,
                                   "weight_decay": 0.1}
    assert ck.step == 6 and any(k.startswith("m/") for k in ck.optim) and any(k.startswith("v/") for k in ck.optim)
    # 3 steps, then resume to 6 (no --optimizer/--weight-decay: both come from the checkpoint) = 6 straight
    assert _train(capsys, text_file, resumed, "--optimizer", "adamw", "--weight-decay", 0.1, steps=3)[0] == 0
    code, out, err = _train(capsys, text_file, resumed, "--resume")
    assert code == 0, err
    assert "weight decay 0.1" in out
    a, b = load_checkpoint(straight), load_checkpoint(resumed)
    assert b.config.optimizer == a.config.optimizer
    for k in a.params:
        np.testing.assert_allclose(b.params[k], a.params[k], rtol=0, atol=1e-6, err_msg=k)
    # a resumed run may change the decay, as it may change lr
    code, out, err = _train(capsys, text_file, resumed, "--resume", "--weight-decay", 0.2, steps=7)
    assert code == 0, err
    assert load_checkpoint(resumed).config.optimizer["weight_decay"] == 0.2


def test_cli_adamw_defaults_to_torch_weight_decay(text_file):
    args = cli.build_parser().parse_args(["train", "--corpus", str(text_file), "--optimizer", "adamw"])
    assert _config_from_args(args).optimizer["weight_decay"] == 0.01
    args = cli.build_parser().parse_args(["train", "--corpus", str(text_file)])
    assert "weight_decay" not in _config_from_args(args).optimizer  # adam, as before
    # the optimizer the trainer compiles with is the configured one
    args = cli.build_parser().parse_args(["train", "--corpus", str(text_file), *TINY, "--optimizer", "adamw",
                                          "--weight-decay", "0.3"])
    opt = _Trainer(args).step.optimizer
    assert type(opt) is optim.AdamW and opt.weight_decay == 0.3 and opt.lr == 0.01


@pytest.mark.parametrize("optimizer", [[], ["--optimizer", "adam"], ["--optimizer", "sgd"]])
def test_cli_weight_decay_needs_adamw(capsys, tmp_path, text_file, optimizer):
    code, out, err = _train(capsys, text_file, tmp_path / "ck", *optimizer, "--weight-decay", 0.1)
    _one_line_error(code, err, "--weight-decay", "adamw", exit_code=1)
    assert not (tmp_path / "ck").exists()


def test_cli_negative_weight_decay(capsys, tmp_path, text_file):
    code, out, err = _train(capsys, text_file, tmp_path / "ck", "--optimizer", "adamw", "--weight-decay", "-0.1")
    _one_line_error(code, err, "--weight-decay", "-0.1", exit_code=2)


def test_cli_weight_decay_on_resuming_an_adam_run(capsys, tmp_path, text_file):
    ckpt = tmp_path / "ck"
    assert _train(capsys, text_file, ckpt, steps=1)[0] == 0
    code, out, err = _train(capsys, text_file, ckpt, "--resume", "--weight-decay", 0.1, steps=2)
    _one_line_error(code, err, "--weight-decay", "not adam", exit_code=1)
    assert load_checkpoint(ckpt).step == 1


# ---- bench/lm_vs_torch.py --weight-decay ----------------------------------------------------------
def _load_lm_vs_torch():
    import importlib.util
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("bench_lm_vs_torch", os.path.join(root, "bench", "lm_vs_torch.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_lm_vs_torch_weight_decay(tmp_path, text_file):
    """--weight-decay WD: AdamW in both models, recorded in the config; both still compute the same numbers."""
    pytest.importorskip("torch")
    lvt = _load_lm_vs_torch()
    tiny = ["--text", str(text_file), "--hidden", "8", "--embed", "4", "--window", "8", "--streams", "4",
            "--eval-streams", "4", "--device", "cpu", "--quiet", "--steps", "3", "--eval-every", "0", "--lr", "0.05"]
    results = {}
    for wd in ("0.5", "0"):
        out = tmp_path / f"wd{wd}.json"
        assert lvt.main([*tiny, "--weight-decay", wd, "--out", str(out)]) == 0
        results[wd] = json.loads(out.read_text())
    res, plain = results["0.5"], results["0"]
    assert res["config"]["weight_decay"] == 0.5 and res["config"]["optimizer"] == "adamw"
    assert plain["config"]["weight_decay"] == 0.0 and plain["config"]["optimizer"] == "adam"
    a, b = res["impls"]["rnngraph"]["first_losses"], res["impls"]["torch"]["first_losses"]
    np.testing.assert_allclose(a, b, rtol=1e-4)  # same start, batches and update rule
    pa = plain["impls"]["rnngraph"]["first_losses"]
    assert a[0] == pa[0] and abs(a[2] - pa[2]) > 1e-4  # the decay changes the trajectory after the first update
    args = lvt.build_parser().parse_args(["--weight-decay", "0.5", "--hidden", "8", "--embed", "4", "--device", "cpu"])
    assert type(lvt.RnngraphModel(args, 10).step.optimizer) is optim.AdamW
    assert type(lvt.TorchModel(args, 10).opt).__name__ == "AdamW"
    assert lvt.main(["--text", str(text_file), "--weight-decay", "-1", "--steps", "1"]) == 2
