#!/usr/bin/env bash
# Every published crate packages (`cargo package`), and each package holds what the crate
# compiles from: every file git tracks in the crate's directory but its integration tests
# (`tests/`, which need the unpublished inboxed-test and stay in the repository): its SQL, its
# migrations, the README and licence files its manifest names; and the target of every `include_str!`/
# `include_bytes!` in its sources, which must lie inside the package (a path out of the crate's
# directory builds here and fails for every user of the published crate).
#
# The packages are not compiled again from their archives (`--no-verify`): that would build
# every dependency a second time in a directory of its own, minutes on two cores, to learn
# what the two checks above already say; the workspace build compiles the same sources.
set -euo pipefail
cd "$(dirname "$0")/../.."

published=(inboxed-core inboxed-postgres inboxed-sqlite inboxed-mysql inboxed-rabbitmq
  inboxed-nats inboxed-redis inboxed-kafka inboxed-sqs inboxed inboxed-testkit inboxed-console
  inboxed-cli)

# Every crate not in the list must say `publish = false`: a new crate is a decision here.
for manifest in crates/*/Cargo.toml examples/*/Cargo.toml; do
  name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -n 1)
  if ! printf '%s\n' "${published[@]}" | grep -qx "$name" && ! grep -q '^publish = false' "$manifest"; then
    printf 'package.sh: %s is neither in the published list nor `publish = false`\n' "$name" >&2
    exit 1
  fi
done

args=()
for c in "${published[@]}"; do args+=(-p "$c"); done
cargo package --no-verify --allow-dirty --quiet "${args[@]}"

python3 - "${CARGO_TARGET_DIR:-target}" "${published[@]}" <<'EOF'
import os, re, subprocess, sys, tarfile

version = re.search(r'^version = "([^"]+)"', open("Cargo.toml").read(), re.M).group(1)
failed = False
target = sys.argv[1]
for crate in sys.argv[2:]:
    archive = f"{target}/package/{crate}-{version}.crate"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        prefix = names[0].split("/")[0] + "/"
        inside = {n[len(prefix):] for n in names}
        sources = {n[len(prefix):]: tar.extractfile(n).read().decode("utf-8", "replace")
                   for n in names if n.endswith(".rs")}
    tracked = subprocess.run(["git", "ls-files", f"crates/{crate}"], capture_output=True,
                             text=True, check=True).stdout.split()
    for path in tracked:
        rel = path[len(f"crates/{crate}/"):]
        if rel not in inside and not rel.startswith("tests/"):
            print(f"package.sh: {crate}: {rel} is tracked but not in the package")
            failed = True
    for src, text in sources.items():
        for included in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"', text):
            resolved = os.path.normpath(os.path.join(os.path.dirname(src), included))
            if resolved not in inside:
                print(f"package.sh: {crate}: {src} includes {included}, which is not in the package")
                failed = True
    print(f"package.sh: {crate}: {len(inside)} files")
sys.exit(1 if failed else 0)
EOF
