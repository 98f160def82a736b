#!/usr/bin/env bash
# Time-boxed fuzzing on stable Rust (no sanitizer), used by CI.
#   fuzz/run.sh [SECONDS_PER_TARGET]   (default 20)
# Exits non-zero if any target crashes, hangs, leaks past the RSS limit, or fails to build.
# New inputs go to a scratch corpus, so the committed fuzz/corpus is read but never modified.
set -euo pipefail

secs="${1:-20}"
cd "$(dirname "${BASH_SOURCE[0]}")"

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

cargo fuzz build -s none

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

failed=()
for target in framing envelope engine sse anthropic openai_chat openai_responses mcp_jsonrpc mcp_http_answer profile_front_matter run code_host_lines history claude_cli acp_rpc; do
    args=(-max_total_time="$secs" -rss_limit_mb=2048 -timeout=60 -print_final_stats=1)
    case "$target" in
        engine | envelope) args+=(-max_len=70000) ;;
        sse | anthropic | openai_chat | openai_responses | mcp_jsonrpc | mcp_http_answer) args+=(-max_len=16384) ;;
        profile_front_matter) args+=(-max_len=33000) ;;
        run) args+=(-max_len=4096) ;;
        code_host_lines) args+=(-max_len=16384) ;;
        history) args+=(-max_len=8192) ;;
    esac
    mkdir -p "$scratch/$target"
    echo "=== $target: ${secs}s ==="
    if ! cargo fuzz run -s none "$target" "$scratch/$target" "corpus/$target" -- "${args[@]}"; then
        echo "!!! $target failed; reproducer(s) in fuzz/artifacts/$target/" >&2
        failed+=("$target")
    fi
done

if ((${#failed[@]})); then
    echo "fuzz targets with findings: ${failed[*]}" >&2
    exit 1
fi
echo "all fuzz targets ran ${secs}s each without findings"
