#!/usr/bin/env bash
# Installs the real MCP servers the minibot-mcp tests talk to. Idempotent: re-running only checks.
#   MINIBOT_MCP_PEERS  install dir for npm peers (default $HOME/.cache/minibot-rs/mcp-peers)
#   PYTHON             interpreter that gets `mcp<2` and `cryptography` (default python3)
set -euo pipefail

peers="${MINIBOT_MCP_PEERS:-$HOME/.cache/minibot-rs/mcp-peers}"
python="${PYTHON:-python3}"
everything="$peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
# The official MCP conformance suite, for the client scenarios. Pinned: 0.1.14 and later import `fs.globSync`,
# which needs Node 22, and Debian/NodeSource here ship Node 20.
conformance_version="0.1.13"
conformance="$peers/node_modules/@modelcontextprotocol/conformance"

mkdir -p "$peers"
if [[ -f "$everything" ]]; then
    echo "server-everything already in $peers"
else
    npm install --no-audit --no-fund --prefix "$peers" @modelcontextprotocol/server-everything
fi

if [[ -f "$conformance/package.json" ]] && grep -q "\"version\": \"$conformance_version\"" "$conformance/package.json"; then
    echo "conformance $conformance_version already in $peers"
else
    npm install --no-audit --no-fund --save-exact --prefix "$peers" "@modelcontextprotocol/conformance@$conformance_version"
fi

# FastMCP lives at mcp.server.fastmcp only before 2.0.
if "$python" -c 'import mcp.server.fastmcp' 2>/dev/null; then
    echo "python mcp<2 already installed for $python"
else
    "$python" -m pip install --quiet "mcp<2"
fi

# The vault tests check byte compatibility with MiniBot's Python vault through `cryptography`'s AESGCM.
if "$python" -c 'import cryptography.hazmat.primitives.ciphers.aead' 2>/dev/null; then
    echo "python cryptography already installed for $python"
else
    "$python" -m pip install --quiet cryptography
fi

echo "MCP peers ready: $everything"
