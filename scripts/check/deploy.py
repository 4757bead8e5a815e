#!/usr/bin/env python3
"""The service units and the Kubernetes manifests under deploy/, validated.

- deploy/systemd/: `systemd-analyze verify` of every unit (a template through an instance),
  with ExecStart pointed at the `inboxed` binary this build made (`$INBOXED`, default
  target/debug/inboxed), so that a command that does not exist fails too; any warning fails.
- deploy/kubernetes/: `kubernetes-validate --strict` (the API's published schemas, bundled)
  of every resource: an unknown or misspelt field fails.

`--self-test` first shows each check failing on a copy broken on purpose.

Usage: INBOXED=target/debug/inboxed scripts/check/deploy.py [--self-test]
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy/systemd"
MANIFESTS = ROOT / "deploy/kubernetes"
INSTALLED = "/usr/local/bin/inboxed"


def verify_units(units, binary):
    """What systemd-analyze says of `units` (a directory); empty when it says nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        names = []
        for unit in sorted(units.iterdir()):
            text = unit.read_text().replace(INSTALLED, str(binary))
            (pathlib.Path(tmp) / unit.name).write_text(text)
            # A template is verified through an instance of it.
            names.append(unit.name.replace("@.", "@example."))
        done = subprocess.run(
            ["systemd-analyze", "verify", *names], cwd=tmp, capture_output=True, text=True
        )
        said = (done.stdout + done.stderr).strip()
        return said if said or done.returncode else ""


def validate_manifests(manifests):
    done = subprocess.run(
        ["kubernetes-validate", "--strict", "--quiet", *sorted(map(str, manifests.glob("*.yaml")))],
        capture_output=True, text=True,
    )
    said = (done.stdout + done.stderr).strip()
    return said if done.returncode or "ERROR" in said or "WARN" in said else ""


def self_test(binary):
    with tempfile.TemporaryDirectory() as tmp:
        broken = pathlib.Path(tmp) / "systemd"
        shutil.copytree(UNITS, broken)
        unit = broken / "inboxed-relay.service"
        unit.write_text(unit.read_text().replace("TimeoutStopSec=45", "TimeoutStopSecs=45"))
        if not verify_units(broken, binary):
            sys.exit("deploy.py self-test: a misspelt key in a unit was not caught")
        shutil.rmtree(broken)
        shutil.copytree(UNITS, broken)
        unit = broken / "inboxed-purge@.service"
        unit.write_text(unit.read_text().replace(" purge ", " purge-nothing ").replace(INSTALLED, "/nonexistent/inboxed"))
        if not verify_units(broken, binary):
            sys.exit("deploy.py self-test: a template's missing command was not caught")
        manifests = pathlib.Path(tmp) / "kubernetes"
        shutil.copytree(MANIFESTS, manifests)
        bad = manifests / "relay.yaml"
        bad.write_text(bad.read_text().replace("failureThreshold: 6", "failureTreshold: 6"))
        if not validate_manifests(manifests):
            sys.exit("deploy.py self-test: a misspelt field in a manifest was not caught")
    print("deploy.py self-test: every broken copy caught")


def main():
    binary = pathlib.Path(os.environ.get("INBOXED", ROOT / "target/debug/inboxed")).resolve()
    if not binary.is_file():
        sys.exit(f"deploy.py: no inboxed binary at {binary} (build it, or set INBOXED)")
    if "--self-test" in sys.argv:
        self_test(binary)
    problems = []
    said = verify_units(UNITS, binary)
    if said:
        problems.append(f"systemd-analyze verify:\n{said}")
    said = validate_manifests(MANIFESTS)
    if said:
        problems.append(f"kubernetes-validate:\n{said}")
    for p in problems:
        print(f"deploy.py: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print("deploy.py: the units and the manifests validate")


if __name__ == "__main__":
    main()
