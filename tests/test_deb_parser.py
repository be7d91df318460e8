"""``package:deb:<name>`` verdicts from recorded output of the real script on a tier-3 bookworm host.

Each ``tests/recorded/deb_*.txt`` is what ``deb_argv(name)`` printed there after the package's
files were edited, removed or replaced (``pb-spaces`` and ``pb-gone`` are small packages built
with ``dpkg-deb`` in the container to hold names with spaces and to be removed, not purged).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from commands.checks.deb import MD5_NOTE, SCRIPT_ID, deb_argv, parse_deb, shown_command
from commands.command_result import CommandResult

RECORDED = Path(__file__).parent / "recorded"


def recorded(name: str, text: str | None = None) -> CommandResult:
    output = text.encode() if text is not None else (RECORDED / name).read_bytes()
    return CommandResult("sh -c …", 0, output, 0.05)


def test_pristine_package_passes_naming_version_and_md5_count() -> None:
    finding = parse_deb("libc6:amd64", recorded("deb_pristine.txt"))
    assert finding.status == "pass", finding.summary
    assert finding.summary == ("libc6:amd64 2.36-9+deb12u14: all 285 file(s) with a stored md5 (284 in md5sums, "
                               f"1 conffiles) match dpkg's record ({MD5_NOTE})")


def test_changed_binary_and_files_that_are_no_longer_regular_fail_with_the_reinstall() -> None:
    finding = parse_deb("openssh-client", recorded("deb_changed.txt"))
    assert finding.status == "fail"
    assert "/usr/bin/ssh-keygen: md5 differs" in finding.summary
    assert "/usr/bin/scp: not a regular file, md5 differs" in finding.summary
    assert "3 path(s) differ from dpkg's record (md5-based" in finding.summary
    fix = "apt-get install --reinstall openssh-client=1:9.2p1-2+deb12u10"
    assert finding.summary.endswith(f"To make it pristine: {fix}") and finding.details["fix"] == fix


def test_edited_and_deleted_conffiles_only_warn_saying_admins_edit_them() -> None:
    finding = parse_deb("openssh-server", recorded("deb_conffiles.txt"))
    assert finding.status == "warn", finding.summary
    assert finding.details["conffiles_changed"] == ["/etc/default/ssh: md5 differs", "/etc/pam.d/sshd is missing",
                                                    "/etc/ssh/moduli: md5 differs"]
    assert "Admins edit conffiles on purpose" in finding.summary and MD5_NOTE in finding.summary
    assert "23 file(s) with a stored md5 (14 in md5sums, 9 conffiles)" in finding.summary
    # Evidence leads with what dpkg --verify said; the conffiles' digests are counted, not pasted.
    assert finding.evidence is not None and finding.evidence.output.startswith("@verify\n??5?????? c /etc/default/ssh")
    assert "(9 conffile line(s) not shown)" in finding.evidence.output


def test_names_with_spaces_and_parentheses_are_read_whole() -> None:
    finding = parse_deb("pb-spaces", recorded("deb_spaces.txt"))
    assert finding.status == "fail"
    assert finding.details["changed"] == ["/usr/share/pb-spaces/with space.txt: md5 differs"]
    assert finding.details["missing"] == ["/usr/share/pb-spaces/odd (name).txt is missing"]
    assert finding.details["conffiles_changed"] == ["/etc/pb-spaces/my conf.conf: md5 differs"]
    assert finding.details["conffiles"] == 2
    assert "apt-get install --reinstall pb-spaces=1.0-1" in finding.summary


def test_an_unreadable_file_names_dpkgs_reason() -> None:
    """Root reads every file, so these lines are the recorded one edited to what dpkg prints as a user."""
    text = (RECORDED / "deb_spaces.txt").read_text().replace(
        "missing     /usr/share/pb-spaces/odd (name).txt",
        "missing     /usr/share/pb-spaces/plain.txt (Permission denied)")
    finding = parse_deb("pb-spaces", recorded("", text))
    assert finding.details["missing"] == ["/usr/share/pb-spaces/plain.txt cannot be read (Permission denied)"]
    # A name that itself ends in a parenthesis is still a name: strerror texts start with a capital.
    named = text.replace("plain.txt (Permission denied)", "notes (draft)")
    missing = parse_deb("pb-spaces", recorded("", named)).details["missing"]
    assert missing == ["/usr/share/pb-spaces/notes (draft) is missing"]


def test_unknown_check_letters_fail_a_file_and_an_unreadable_line_never_passes() -> None:
    """A later dpkg may fill positions that are '?' today: a failed check is still a failed check."""
    pristine = (RECORDED / "deb_pristine.txt").read_text()
    unknown = pristine.replace("@verify\n", "@verify\n??.?????T   /usr/lib/x86_64-linux-gnu/libc.so.6\n")
    finding = parse_deb("libc6:amd64", recorded("", unknown))
    assert finding.status == "fail"
    assert "libc.so.6: check 'T' failed (position 9, unknown to proofbot)" in finding.summary
    odd = pristine.replace("@verify\n", "@verify\nsomething dpkg 1.30 might say\n")
    doubt = parse_deb("libc6:amd64", recorded("", odd))
    assert doubt.status == "warn" and "something dpkg 1.30 might say" in doubt.summary


def test_no_md5sums_is_an_error_because_dpkg_verify_is_silent_then() -> None:
    finding = parse_deb("lsb-base", recorded("deb_no_md5sums.txt"))
    assert finding.status == "error"
    assert "control file 'md5sums' does not exist" in finding.summary and "nothing is proven" in finding.summary


def test_dpkg_stopping_midway_is_an_error_not_a_pass() -> None:
    finding = parse_deb("usr-is-merged", recorded("deb_dpkg_error.txt"))
    assert finding.status == "error"
    assert "cannot compute MD5 digest for file '/usr/share/doc/usr-is-merged/copyright'" in finding.summary


def test_removed_not_purged_and_absent_packages_are_errors() -> None:
    removed = parse_deb("pb-gone", recorded("deb_config_files.txt"))
    assert removed.status == "error" and "only its conffiles remain" in removed.summary
    absent = parse_deb("nonexist", recorded("deb_not_installed.txt"))
    assert absent.status == "error" and absent.summary.startswith("nonexist is not installed")


def test_output_cut_short_proves_nothing() -> None:
    text = (RECORDED / "deb_pristine.txt").read_text()
    finding = parse_deb("libc6:amd64", recorded("", text[: text.index("@verify")]))
    assert finding.status == "error" and "ended early" in finding.summary


def test_more_lines_than_the_script_prints_are_counted_in_the_failure() -> None:
    head, _, tail = (RECORDED / "deb_changed.txt").read_text().rpartition("@rc 0\n")
    finding = parse_deb("openssh-client", recorded("", f"{head}@cut 1200\n@rc 0\n{tail}"))
    assert finding.status == "fail" and "1203 path(s) differ" in finding.summary


def test_the_real_script_on_a_host_without_dpkg_says_so(tmp_path: Path) -> None:
    """The script itself, run here with a PATH that holds only ``sh``: a non-Debian host."""
    (tmp_path / "sh").symlink_to("/bin/sh")
    ran = subprocess.run(deb_argv("openssh-server"), env={**os.environ, "PATH": str(tmp_path)},
                         capture_output=True, timeout=30, check=False)
    finding = parse_deb("openssh-server", CommandResult("sh", ran.returncode, ran.stdout + ran.stderr, 0.01))
    assert ran.returncode == 127 and finding.status == "error"
    assert finding.summary == "dpkg is not on the host: it is not a Debian system"


def test_the_package_name_is_an_argument_never_part_of_the_script() -> None:
    argv = deb_argv("openssh-server")
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["proofbot-deb", "openssh-server"]
    assert "openssh-server" not in argv[2] and '"$1"' in argv[2]
    assert shown_command("openssh-server").startswith(f"sh -c '<proofbot dpkg script sha256:{SCRIPT_ID}>' "
                                                      "proofbot-deb openssh-server  # runs: dpkg-query -W")


def test_readme_example_names_the_current_script() -> None:
    """The docs' example (docs/inventory.md) is copied from a tier-3 run: a changed script must be copied again."""
    readme = (Path(__file__).parents[1] / "docs" / "inventory.md").read_text(encoding="utf-8")
    assert f"{shown_command('openssh-client')}\n" in readme
