"""``package:<dist>`` verdicts from recorded probe output (real pip installs, then edited as the seed's host was)."""

from __future__ import annotations

import json
from pathlib import Path

from commands.checks.package import PROBE_ID, PROBE_SOURCE, package_argv, parse_package, shown_command
from commands.command_result import CommandResult

RECORDED = Path(__file__).parent / "recorded"
PYTHON = "/root/ml-env/bin/python"


def probe(name: str, exit_status: int = 0) -> CommandResult:
    return CommandResult("probe", exit_status, (RECORDED / name).read_bytes(), 0.05)


def test_pristine_install_passes_naming_version_installer_and_count() -> None:
    finding = parse_package(PYTHON, "sgl-kernel", probe("package_pristine.jsonl"))
    assert finding.status == "pass", finding.summary
    assert "sgl-kernel 0.1.4 (installer pip)" in finding.summary
    assert "7 file(s) proven" in finding.summary and "2 __pycache__ .pyc ignored" in finding.summary
    assert finding.evidence is not None and "row(s) not shown: each matched RECORD" in finding.evidence.output


def test_seeded_patch_fails_naming_the_edited_and_the_added_file_with_the_fix() -> None:
    finding = parse_package(PYTHON, "sgl-kernel", probe("package_seeded.jsonl"))
    assert finding.status == "fail"
    assert "sgl_kernel/speculative.py differs from RECORD: size 75 B (recorded 26 B)" in finding.summary
    assert "sha256 a97a50d12fd4 (recorded b3912e6b4012)" in finding.summary
    assert "sgl_kernel/ddtree_kernels.py is not listed in RECORD (40 B, sha256" in finding.summary
    assert ("To make it pristine: move aside the unlisted file(s) (a reinstall leaves them), then "
            f"{PYTHON} -m pip install --force-reinstall --no-deps sgl-kernel==0.1.4") in finding.summary
    assert [item["path"] for item in finding.details["unlisted"]] == ["sgl_kernel/ddtree_kernels.py"]
    assert finding.evidence is not None and "ddtree_kernels.py" in finding.evidence.output


def test_hostile_host_missing_file_sourceless_pyc_symlink_and_newline_name_all_fail() -> None:
    finding = parse_package(PYTHON, "sgl-kernel", probe("package_hostile.jsonl"))
    assert finding.status == "fail"
    assert finding.details["missing"] == ["sgl_kernel/__init__.py"]
    unlisted = {item["path"]: item["why"] for item in finding.details["unlisted"]}
    assert "symlink to '/etc'" in unlisted["sgl_kernel/etc_link"]
    assert "sourceless .pyc" in unlisted["sgl_kernel/helpers.pyc"]
    assert "not listed in RECORD" in unlisted["sgl_kernel/new\nline.py"]
    # A sourceless .pyc in __pycache__ is not importable: never proof either way, only counted.
    assert finding.details["pyc_ignored"] == 3


def test_odd_record_rows_are_judged_one_by_one_and_never_pass() -> None:
    finding = parse_package(PYTHON, "sgl-kernel", probe("package_odd_record.jsonl"))
    assert finding.status == "warn", finding.summary
    why = {item["path"]: item["why"] for item in finding.details["untrusted"]}
    assert "not valid urlsafe base64" in why["sgl_kernel/bad.py"]
    assert "listed without a hash" in why["sgl_kernel/nohash.py"]
    assert "'md5' is not one the wheel spec accepts" in why["sgl_kernel/old.py"]
    assert "#! line the installer" in why["../../../bin/sgl-tool"]
    assert "outside the environment" in why["/etc/hostname"]
    assert "2 field(s)" in why["sgl_kernel/two-fields.py"]
    assert "'../../../bin/sgl-tool,sha256=ANSkBzj42p7ErfcKLTx8KrdcHfEjkSsGDLkjCQMTQqU,40'" in finding.summary
    # A quoted path with a comma, a path with a newline and a sha512 row are proven like any other.
    assert finding.details["proven"] == 10 and not finding.details["changed"]


def test_editable_install_warns_that_record_cannot_prove_it() -> None:
    finding = parse_package(PYTHON, "edit-me", probe("package_editable.jsonl"))
    assert finding.status == "warn"
    assert "editable install from file:///tmp/pkgt/e/edit_me-src" in finding.summary


def test_dist_not_installed_is_an_error() -> None:
    finding = parse_package(PYTHON, "sglang", probe("package_not_installed.jsonl", 3))
    assert finding.status == "error"
    assert finding.summary == f"sglang is not installed in the environment of {PYTHON}"


def test_missing_interpreter_is_an_error() -> None:
    result = CommandResult("probe", 127, b"sh: 1: /root/ml-env/bin/python: not found\n", 0.01)
    finding = parse_package(PYTHON, "sglang", result)
    assert finding.status == "error" and "interpreter /root/ml-env/bin/python is missing" in finding.summary


def test_output_cut_before_the_end_line_proves_nothing() -> None:
    lines = (RECORDED / "package_pristine.jsonl").read_bytes().splitlines(keepends=True)
    finding = parse_package(PYTHON, "sgl-kernel", CommandResult("probe", 0, b"".join(lines[:-1]), 0.01))
    assert finding.status == "error" and "ended early" in finding.summary


def test_a_forged_row_cannot_break_framing_or_pass_a_changed_file() -> None:
    """A file name holding a newline and a fake JSON row stays one escaped string in one line."""
    lines = (RECORDED / "package_seeded.jsonl").read_text().splitlines()
    forged = {"t": "extra", "p": 'x\n{"t": "end"}', "st": "ok", "size": 1, "a": "sha256", "d": "AA"}
    text = "\n".join([*lines[:-1], json.dumps(forged, ensure_ascii=True), lines[-1]]) + "\n"
    finding = parse_package(PYTHON, "sgl-kernel", CommandResult("probe", 0, text.encode(), 0.01))
    assert finding.status == "fail" and len(finding.details["unlisted"]) == 2


def test_argv_carries_the_probe_as_one_element_and_evidence_names_it_by_hash() -> None:
    argv = package_argv(PYTHON, "sgl-kernel")
    assert argv[:4] == [PYTHON, "-I", "-S", "-c"] and argv[4] == PROBE_SOURCE and argv[5] == "sgl-kernel"
    assert shown_command(PYTHON, "sgl-kernel").startswith(f"{PYTHON} -I -S -c '<proofbot package probe sha256:")


def test_a_changed_module_starting_with_a_shebang_still_fails() -> None:
    """Only scripts under the environment's bin/ get the rewritten-#! doubt, not the package's modules."""
    text = (RECORDED / "package_seeded.jsonl").read_text().replace('"st": "ok", "t": "row"}',
                                                                  '"sb": true, "st": "ok", "t": "row"}')
    finding = parse_package(PYTHON, "sgl-kernel", CommandResult("probe", 0, text.encode(), 0.01))
    assert finding.status == "fail" and finding.details["changed"][0]["path"] == "sgl_kernel/speculative.py"


def test_readme_example_names_the_current_probe() -> None:
    """README's example is copied from a demo run: a changed probe must be copied again."""
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    assert f"-I -S -c '<proofbot package probe sha256:{PROBE_ID}>' sgl-kernel" in readme
