#!/usr/bin/env bash
# Installs the real MCP servers the minibot-mcp tests talk to. Idempotent: re-running only checks.
#   MINIBOT_MCP_PEERS  install dir for npm peers (default $HOME/.cache/minibot-rs/mcp-peers)
#   PYTHON             interpreter that gets `mcp<2` (default python3)
set -euo pipefail

peers="${MINIBOT_MCP_PEERS:-$HOME/.cache/minibot-rs/mcp-peers}"
python="${PYTHON:-python3}"
everything="$peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

mkdir -p "$peers"
if [[ -f "$everything" ]]; then
    echo "server-everything already in $peers"
else
    npm install --no-audit --no-fund --prefix "$peers" @modelcontextprotocol/server-everything
fi

# FastMCP lives at mcp.server.fastmcp only before 2.0.
if "$python" -c 'import mcp.server.fastmcp' 2>/dev/null; then
    echo "python mcp<2 already installed for $python"
else
    "$python" -m pip install --quiet "mcp<2"
fi

echo "MCP peers ready: $everything"
