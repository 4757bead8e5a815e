#!/usr/bin/env bash
# The `inboxed` crate's public items, every feature on, against the list checked in at
# crates/inboxed/public-api.txt: an item exported by accident (a glob, a `pub` that should have
# been `pub(crate)`) or removed by accident fails CI. After a deliberate change, run it with
# `--bless` to rewrite the list, and commit the list with the change.
#
# The items come from rustdoc's own index of the crate (`all.html`): every struct, enum, trait,
# function, constant, type alias and macro reachable from the crate root, under the path a user
# names it by. Methods and fields are not listed: they change with their types, which are.
set -euo pipefail
cd "$(dirname "$0")/../.."
list=crates/inboxed/public-api.txt
target=${CARGO_TARGET_DIR:-target}

cargo doc -q -p inboxed --all-features --no-deps
python3 - "$target/doc/inboxed/all.html" >"$target/public-api.txt" <<'EOF'
import html, re, sys

page = open(sys.argv[1]).read()
items = []
# <h3 id="structs">Structs</h3><ul class="all-items"><li><a href="rabbitmq/struct.RabbitConfig.html">…
for kind, block in re.findall(r'<h3 id="([a-z-]+)">[^<]*</h3><ul class="all-items">(.*?)</ul>', page, re.S):
    for href in re.findall(r'<a href="([^"]+)\.html"', block):
        *modules, leaf = href.split("/")
        item_kind, name = leaf.split(".", 1)
        items.append(f"{item_kind} {'::'.join(['inboxed', *modules, name])}")
if not items:
    sys.exit("public-api.sh: no items found in rustdoc's all.html: has its layout changed?")
print("\n".join(sorted(set(items))))
EOF

if [ "${1:-}" = --bless ]; then
  cp "$target/public-api.txt" "$list"
  printf 'public-api.sh: wrote %s (%s items)\n' "$list" "$(wc -l <"$list")"
  exit 0
fi
if ! diff -u "$list" "$target/public-api.txt"; then
  printf '\npublic-api.sh: the public items of `inboxed` differ from %s (- listed, + built).\n' "$list" >&2
  printf 'If the change is deliberate, run scripts/check/public-api.sh --bless and commit the list.\n' >&2
  exit 1
fi
printf 'public-api.sh: %s public items, as listed\n' "$(wc -l <"$list")"
