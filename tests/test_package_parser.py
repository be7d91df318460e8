"""``package:<dist>`` verdicts from recorded probe output (real pip installs, then edited as the seed's host was)."""

from __future__ import annotations

import json
from pathlib import Path

from commands.checks.package import PROBE_ID, PROBE_SOURCE, package_argv, parse_package, shown_command
from commands.checks.package_guard import GUARD_ID, SCRIPT_TEXT
from commands.command_result import CommandResult
from tests.source_ast import parse_source

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
    assert ("a script whose #! header is now '#!/usr/bin/env python3' where RECORD's was "
            "'#!/tmp/pkgt2/ml-odd/bin/python' (both as an installer writes them), the rest byte for byte"
            in why["../../../bin/sgl-tool"])
    assert "outside the environment" in why["/etc/hostname"]
    assert "2 field(s)" in why["sgl_kernel/two-fields.py"]
    assert "'../../../bin/sgl-tool,sha256=86KY47owFETOJLj4OHZa4RO4QDfXw8OFLb7OMU8414g,221'" in finding.summary
    # A quoted path with a comma, a path with a newline and a sha512 row are proven like any other.
    assert finding.details["proven"] == 11 and not finding.details["changed"]


def test_editable_install_warns_that_record_cannot_prove_it() -> None:
    finding = parse_package(PYTHON, "edit-me", probe("package_editable.jsonl"))
    assert finding.status == "warn"
    assert "editable install from file:///tmp/pkgt/e/edit_me-src" in finding.summary


def test_dist_not_installed_is_an_error() -> None:
    finding = parse_package(PYTHON, "sglang", probe("package_not_installed.jsonl", 3))
    assert finding.status == "error"
    assert finding.summary == f"sglang is not installed in the environment of {PYTHON}"


def test_missing_interpreter_is_an_error() -> None:
    result = CommandResult("probe", 3, b'{"detail": "No such file or directory", "prefix": "/root/ml-env", '
                                       b'"reason": "no-interpreter", "t": "error"}\n', 0.01)
    finding = parse_package(PYTHON, "sglang", result)
    assert finding.status == "error"
    assert finding.summary == ("interpreter /root/ml-env/bin/python is missing (No such file or directory): "
                               "no environment there to check")


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


def test_argv_runs_the_guard_with_the_probe_as_one_element_and_evidence_names_both_by_hash() -> None:
    """The environment's interpreter is only an argument (data): never argv[0], never run."""
    argv = package_argv(PYTHON, "sgl-kernel")
    assert argv == ["sh", "-c", SCRIPT_TEXT, "proofbot-package", PROBE_SOURCE, PYTHON, "sgl-kernel"]
    assert shown_command(PYTHON, "sgl-kernel").startswith(
        f"sh -c '<proofbot package guard sha256:{GUARD_ID}>' proofbot-package "
        f"'<proofbot package probe sha256:{PROBE_ID}>' {PYTHON} sgl-kernel  # runs: <root-owned python3> -I -S")
    # The probe is one text on the host: its fs part pasted in, compiled as Python 3.8 would need it.
    assert "from commands" not in PROBE_SOURCE and PROBE_SOURCE.count("from __future__") == 1
    parse_source(PROBE_SOURCE, feature_version=(3, 8))


def test_a_changed_module_starting_with_a_shebang_still_fails() -> None:
    """Only scripts under the environment's bin/ get the rewritten-#! doubt, not the package's modules."""
    text = (RECORDED / "package_seeded.jsonl").read_text().replace('"st": "ok", "t": "row"}',
                                                                  '"sb": true, "st": "ok", "t": "row"}')
    finding = parse_package(PYTHON, "sgl-kernel", CommandResult("probe", 0, text.encode(), 0.01))
    assert finding.status == "fail" and finding.details["changed"][0]["path"] == "sgl_kernel/speculative.py"


def test_readme_example_names_the_current_probe() -> None:
    """The docs' example (docs/inventory.md) is copied from a demo run: a changed probe must be copied again."""
    readme = (Path(__file__).parents[1] / "docs" / "inventory.md").read_text(encoding="utf-8")
    assert f"'<proofbot package probe sha256:{PROBE_ID}>' " in readme
    assert f"'<proofbot package guard sha256:{GUARD_ID}>' " in readme


# The recordings below are real runs of the guard and probe (tests/package_recordings.py: real pip installs
# into real venvs, edited as a hostile owner would).


def test_a_line_inserted_in_a_console_script_fails_though_its_first_line_is_untouched() -> None:
    finding = parse_package(PYTHON, "sgl-kernel", probe("package_script_changed.jsonl"))
    assert finding.status == "fail", finding.summary
    assert "../../../bin/sgl-tool differs from RECORD: size 234 B (recorded 224 B)" in finding.summary
    assert "is not one an installer writes" not in finding.summary  # its header is pip's own


def test_links_in_the_dist_info_and_a_package_dir_fail_and_nothing_behind_them_is_read() -> None:
    output = (RECORDED / "package_links.jsonl").read_text()
    finding = parse_package(PYTHON, "sgl-kernel", probe("package_links.jsonl"))
    assert finding.status == "fail"
    site = "/tmp/pkgt2/ml-links/lib/python3.11/site-packages"
    assert (f"sgl_kernel-0.1.4.dist-info/cache/secret is reached through the symlink "
            f"{site}/sgl_kernel-0.1.4.dist-info/cache -> '/tmp/pkgt2/root-only': not followed") in finding.summary
    assert f"sgl_kernel/vendor/secret is reached through the symlink {site}/sgl_kernel/vendor" in finding.summary
    assert "sgl_kernel/vendor is a symlink to '/tmp/pkgt2/root-only' that RECORD does not list" in finding.summary
    # The probe printed no digest and no size for either row: only the owner's own RECORD text.
    rows = [json.loads(line) for line in output.splitlines() if "/secret" in line]
    assert len(rows) == 2 and all("d" not in row and "size" not in row for row in rows)


def test_a_pass_on_an_environment_its_owner_can_rewrite_says_what_it_proves_and_who() -> None:
    finding = parse_package(PYTHON, "sgl-kernel", probe("package_owned.jsonl"))
    assert finding.status == "pass"
    assert finding.summary.endswith(
        "Only as good as RECORD: it and the files can both be rewritten by uid 65534 (nobody) "
        "(owner of /tmp/pkgt2/ml-owned), so this proves the files match RECORD, not that nobody changed both")
    assert finding.details["record_writers"] == [{"name": "nobody", "p": "/tmp/pkgt2/ml-owned", "uid": 65534,
                                                  "via": "owner"}]
    # A root-owned environment (the other recordings) says nothing of the kind.
    assert "Only as good as RECORD" not in parse_package(PYTHON, "sgl-kernel", probe("package_pristine.jsonl")).summary


def test_a_hard_link_to_a_root_only_file_is_not_read() -> None:
    finding = parse_package(PYTHON, "sgl-kernel", probe("package_hardlink.jsonl"))
    assert finding.status == "fail"
    assert ("sgl_kernel/cache.py is a hard link to a file of uid 0 that others cannot read: not read"
            in finding.summary)
    assert "sgl_kernel-0.1.4.dist-info/INSTALLER is a hard link to a file of uid 0" in finding.summary
    output = (RECORDED / "package_hardlink.jsonl").read_text()
    # Neither its text (INSTALLER is printed) nor its size nor its digest: only the owner's own guess in RECORD.
    assert "TOP-SECRET" not in output and '"size": 16' not in output and finding.details["installer"] == "unknown"
    # The environment is nobody's: its pip is their code, so the fix says whom to run it as.
    assert ("To make it pristine: as uid 65534 (nobody), the environment's owner, not as root: "
            f"{PYTHON} -m pip install --force-reinstall") in finding.summary


def test_an_environment_named_through_a_symlink_is_an_error_naming_the_link() -> None:
    finding = parse_package("/tmp/pkgt2/alias/bin/python", "sgl-kernel", probe("package_path_link.jsonl", 3))
    assert finding.status == "error"
    assert finding.summary == ("the environment of /tmp/pkgt2/alias/bin/python is reached through the symlink "
                               "/tmp/pkgt2/alias -> '/tmp/pkgt2/ml-script': not followed, nothing read; "
                               "name its real path in the inventory")


def test_no_root_owned_interpreter_is_a_refusal_with_each_reason() -> None:
    finding = parse_package(PYTHON, "sgl-kernel", probe("package_guard_refused.txt", 5))
    assert finding.status == "error"
    assert finding.summary.startswith("refused: no root-owned interpreter outside the environment to read it with, "
                                      "so nothing was run")
    assert "/tmp/pkgt2/opt/bin/python3.11 is owned by nobody (uid 65534)" in finding.summary
    assert "/usr/local/bin/python3: not there" in finding.summary
    assert finding.evidence is not None and "proofbot-guard:" in finding.evidence.output


def test_a_group_or_everyone_able_to_rewrite_record_is_named_too() -> None:
    """Debian's /usr/local/lib/python3.N/dist-packages is root:staff 2775 on older releases, for one."""
    writers = [{"gid": 50, "name": "staff", "p": "/usr/local/lib/python3.11/dist-packages", "via": "group"},
               {"p": "/srv/shared", "via": "anyone"}]
    lines = []
    for line in (RECORDED / "package_owned.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["t"] == "dist":
            record["writers"] = writers
        lines.append(json.dumps(record))
    finding = parse_package(PYTHON, "sgl-kernel", CommandResult("probe", 0, "\n".join(lines).encode(), 0.01))
    assert finding.status == "pass"
    assert ("rewritten by members of group gid 50 (staff) (group-writable /usr/local/lib/python3.11/dist-packages), "
            "anyone (world-writable /srv/shared), so this proves the files match RECORD") in finding.summary
