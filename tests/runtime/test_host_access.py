"""The seam's host-memory assumption is one capability, asked in one place (csrc/aten/
HostAccess.h): on a runtime whose memory the CPU cannot address, every path that would treat
neuron memory as host memory (the fallback's aliases, the native fast paths, gloo's zero-copy
aliases, Inductor's CPU code) fails with that one error instead of reading device addresses."""

import subprocess
import sys
import textwrap

import pytest
import torch
from torchneuron._C import aten as _aten_c


def test_software_neuroncore_declares_host_addressable_memory():
    assert _aten_c.host_addressable()
    x = torch.arange(6.0, device="neuron")
    torch.testing.assert_close((x * 2 + 1).cpu(), torch.arange(6.0) * 2 + 1)


def test_a_cpu_alias_is_of_a_strided_neuron_tensor_only():
    x = torch.arange(6.0, device="neuron")
    torch.testing.assert_close(_aten_c.cpu_alias(x), torch.arange(6.0))
    with pytest.raises(RuntimeError, match="cpu_alias expects a neuron tensor, got cpu"):
        _aten_c.cpu_alias(torch.ones(2))
    sparse = torch.ones(2, 2).to_sparse().to("neuron")
    with pytest.raises(RuntimeError, match="cpu_alias supports strided tensors only, got layout "
                                           "Sparse"):
        _aten_c.cpu_alias(sparse)


def _run_without_host_access(body: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent("""
        import torch
        from torchneuron._C import aten as _aten_c
        x = torch.arange(4.0, device="neuron")  # made while host access is declared
        _aten_c.override_host_addressable_for_testing(False)
        try:
        {body}
        except RuntimeError as e:
            print("ERROR:", e)
        else:
            print("NO ERROR")
        """).replace("{body}", textwrap.indent(textwrap.dedent(body), "    "))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)


CASES = {
    "fallback op": "torch.sin(x)",
    "arithmetic fast path": "x + x",
    "matmul fast path": "x.view(2, 2) @ x.view(2, 2)",
    "fill fast path": "x.fill_(3.0)",
    "converting copy": "x.to(torch.float16)",
    "collective alias": "_aten_c.cpu_alias(x)",
}


def test_every_host_access_path_fails_in_the_one_place():
    for name, body in CASES.items():
        run = _run_without_host_access(body)
        assert run.returncode == 0, f"{name}: {run.stderr[-2000:]}"
        out = run.stdout.strip().splitlines()[-1]
        assert out.startswith("ERROR:"), f"{name}: no error ({run.stdout})"
        assert "does not declare it" in out and "software NeuronCore" in out, f"{name}: {out}"


def test_compile_refuses_before_generating_code():
    run = _run_without_host_access("""
        torch._dynamo.reset()
        torch.compile(lambda t: t.sin() + 1, backend="neuron")(x)
    """)
    assert "ERROR:" in run.stdout, run.stdout + run.stderr[-2000:]
    assert "Inductor's CPU code generation for neuron buffers" in run.stdout, run.stdout


def test_item_goes_through_the_seam_copy():
    # `.item()` reads through rt::memcpy, so it works without host access too.
    run = _run_without_host_access("print('VALUE', x[2].item())")
    assert "VALUE 2.0" in run.stdout, run.stdout + run.stderr
