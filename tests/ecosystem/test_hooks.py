"""The two mechanisms of torchneuron/ecosystem on their own: a hook on a module's first import
(and at once for a module already imported), and the starting device of a launched process."""

import sys

import pytest

from torchneuron.ecosystem import launcher_rank, post_import


def test_hook_runs_once_after_the_first_import(tmp_path, monkeypatch):
    (tmp_path / "eco_probe_mod.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    post_import.when_imported("eco_probe_mod", lambda m: seen.append(m.VALUE + 1))
    assert seen == [] and "eco_probe_mod" not in sys.modules  # nothing imported by the hook
    import eco_probe_mod  # noqa: F401
    assert seen == [42]
    sys.modules.pop("eco_probe_mod")
    import eco_probe_mod  # noqa: F401, F811  (a re-import runs no hook again)
    assert seen == [42]
    sys.modules.pop("eco_probe_mod")


def test_hook_on_an_imported_module_runs_at_once():
    seen = []
    post_import.when_imported("json", lambda m: seen.append(m.__name__))
    assert seen == ["json"]


def test_a_missing_module_is_still_an_import_error(monkeypatch):
    post_import.when_imported("eco_no_such_module", lambda m: None)
    with pytest.raises(ModuleNotFoundError):
        import eco_no_such_module  # noqa: F401


@pytest.mark.parametrize("value,expected", [("1", 1), (" 3 ", 3), ("", None), ("x", None),
                                            ("-1", None)])
def test_launcher_local_rank(monkeypatch, value, expected):
    monkeypatch.setenv("LOCAL_RANK", value)
    assert launcher_rank.launcher_local_rank() == expected


def test_no_launcher_no_local_rank(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert launcher_rank.launcher_local_rank() is None


def test_launched_process_starts_on_its_local_rank_modulo_the_devices(tmp_path):
    from .fresh import run_script

    out = run_script(tmp_path, """
        import json, torch
        print(json.dumps({"current": torch.neuron.current_device(),
                          "count": torch.neuron.device_count(),
                          "tensor": str(torch.ones(1, device="neuron").device)}))
    """, LOCAL_RANK="5")
    assert out == {"current": 5 % out["count"], "count": out["count"],
                   "tensor": f"neuron:{5 % out['count']}"}
