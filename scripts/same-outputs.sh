#!/usr/bin/env bash
# Runs two nicsched binaries on every shipped scenario the simulator runs and diffs
# what they write (every file of --out, the --json document, the exit status and
# stderr), provenance aside:
# a refactor that should change no figure shows here that it changed none.
# Usage: scripts/same-outputs.sh OLD_BINARY NEW_BINARY [SCENARIO_DIR]
set -euo pipefail
old=${1:?usage: $0 OLD_BINARY NEW_BINARY [SCENARIO_DIR]}
new=${2:?usage: $0 OLD_BINARY NEW_BINARY [SCENARIO_DIR]}
scenarios=${3:-$(dirname "$0")/../scenarios}
command -v jq >/dev/null || { echo "$0: needs jq" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The same document without what names the build, the command or the machine.
# nicsched-run.json lists each file's size and hash: those files are compared
# themselves, and a summary.json's size changes with the command's length.
plain() {
    case "$1" in
        */summary.json) jq -S 'del(.provenance)' "$1" ;;
        */nicsched-run.json) jq -S 'del(.provenance, .command, .commit) | del(.files[]?.bytes, .files[]?.sha256)' "$1" ;;
        *.html) grep -v '<dt>nicsched</dt>\|<dt>command</dt>' "$1" ;;
        *.json) jq -S 'del(.. | .provenance?) | del(.results?, .report?)' "$1" ;;
        *) cat "$1" ;;
    esac
}

same=0 differ=0 skipped=0
while IFS= read -r file; do
    name=$(echo "${file#"$scenarios"/}" | tr / _)
    name=${name%.yaml}
    case "$file" in */lab/*) skipped=$((skipped + 1)); continue ;; esac
    for side in old new; do
        binary=$old; [ "$side" = new ] && binary=$new
        # One run gives both the files and the --json document (the table is
        # printed from the same summaries).
        "$binary" sim "$file" --out "$work/$side/$name" -q --json >"$work/$side-$name.json" 2>"$work/$side-$name.stderr" \
            && echo 0 >"$work/$side-$name.rc" || echo $? >"$work/$side-$name.rc"
    done
    if grep -q 'runs only in the lab\|no enforcer to simulate' "$work/old-$name.stderr" && [ ! -d "$work/old/$name" ]; then
        skipped=$((skipped + 1))
        continue
    fi
    bad=""
    cmp -s "$work/old-$name.rc" "$work/new-$name.rc" || bad="$bad exit-status"
    old_files=$(cd "$work/old/$name" 2>/dev/null && find . -type f | sort || true)
    new_files=$(cd "$work/new/$name" 2>/dev/null && find . -type f | sort || true)
    [ "$old_files" = "$new_files" ] || bad="$bad file-list"
    for f in $old_files; do
        [ -f "$work/new/$name/$f" ] || continue
        cmp -s <(plain "$work/old/$name/$f") <(plain "$work/new/$name/$f") || bad="$bad $f"
    done
    cmp -s "$work/old-$name.stderr" "$work/new-$name.stderr" || bad="$bad stderr"
    cmp -s <(plain "$work/old-$name.json") <(plain "$work/new-$name.json") || bad="$bad --json"
    if [ -n "$bad" ]; then
        echo "DIFFER $file:$bad"
        differ=$((differ + 1))
    else
        same=$((same + 1))
    fi
    rm -rf "$work/old/$name"* "$work/new/$name"*
done < <(find "$scenarios" -name '*.yaml' | sort)
echo "same: $same  differ: $differ  skipped (lab only): $skipped"
[ "$differ" -eq 0 ]
