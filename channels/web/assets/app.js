// Plain script, no build step. Each page's behaviour starts from an element it owns.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const chat = document.getElementById("chat");
  if (chat) startChat(chat);
  const tasks = document.getElementById("tasks-live");
  if (tasks) refreshTasks(tasks);
});

// Server-rendered table HTML (escaped by the server), fetched again every two seconds.
function refreshTasks(root) {
  const url = "/tasks?fragment=1&status=" + encodeURIComponent(root.dataset.status);
  setInterval(async () => {
    try {
      const response = await fetch(url, { credentials: "same-origin" });
      if (response.ok) root.innerHTML = await response.text();
    } catch (error) {
      // Offline for a moment: the next round tries again.
    }
  }, 2000);
}

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function startChat(root) {
  const chatId = root.dataset.chat;
  const token = root.dataset.token;
  const maxAttachments = Number(root.dataset.maxAttachments || 3);
  const list = document.getElementById("messages");
  const older = document.getElementById("older");
  const live = document.getElementById("live");
  const tools = document.getElementById("tools");
  const draft = document.getElementById("draft");
  const status = document.getElementById("status");
  const form = document.getElementById("composer");
  const text = document.getElementById("text");
  const files = document.getElementById("files");
  const pending = document.getElementById("pending-uploads");
  const stop = document.getElementById("stop");
  let socket = null;
  let olderId = null;
  let uploads = [];
  let retry = 500;

  function setBusy(busy) {
    stop.disabled = !busy;
    root.dataset.busy = busy ? "true" : "false";
    if (!busy) {
      live.hidden = true;
      tools.replaceChildren();
      draft.textContent = "";
    }
  }

  function messageNode(message) {
    const item = el("li", { class: "message " + message.role });
    if (message.id !== undefined) item.dataset.id = message.id;
    if (message.is_error) item.classList.add("error");
    if (message.html !== undefined && message.html !== null) {
      const body = el("div", { class: "body" });
      // Rendered and sanitised on the server (ammonia): only harmless tags and attributes remain.
      body.innerHTML = message.html;
      item.append(body);
    } else {
      item.append(el("div", { class: "body" }, message.text));
    }
    return item;
  }

  function scrollDown() {
    window.scrollTo(0, document.body.scrollHeight);
  }

  function showApproval(message) {
    if (document.getElementById("approval-" + message.approval_id)) return;
    const card = el("li", { class: "approval", id: "approval-" + message.approval_id, role: "alertdialog" });
    card.append(el("strong", {}, "Approval required: " + message.tool));
    card.append(el("pre", {}, message.detail));
    if (message.reason) card.append(el("p", {}, message.reason));
    const approve = el("button", { type: "button", class: "approve" }, "Approve");
    const deny = el("button", { type: "button", class: "deny" }, "Deny");
    approve.addEventListener("click", () => answer(message.approval_id, true));
    deny.addEventListener("click", () => answer(message.approval_id, false));
    card.append(approve, deny);
    // In the conversation, where the question was asked, not in a pile below it.
    list.append(card);
    scrollDown();
  }

  function answer(id, approved) {
    send({ kind: "approval", approval_id: id, approved });
  }

  function resolveApproval(message) {
    const card = document.getElementById("approval-" + message.approval_id);
    if (!card) return;
    card.querySelectorAll("button").forEach((b) => b.remove());
    const words = { approved: "Approved", denied: "Denied", expired: "No answer: denied" };
    card.append(el("p", { class: "outcome" }, words[message.outcome] || message.outcome));
    card.classList.add("resolved");
  }

  function onMessage(event) {
    let message;
    try {
      message = JSON.parse(event.data);
    } catch (error) {
      return;
    }
    switch (message.kind) {
      case "history_page": {
        const nodes = message.messages.map(messageNode);
        if (message.initial) {
          list.replaceChildren(...nodes);
          scrollDown();
        } else {
          list.prepend(...nodes);
        }
        olderId = message.before_id;
        older.hidden = olderId === null || olderId === undefined;
        break;
      }
      case "message":
        if (message.source === "answer") {
          live.hidden = true;
          draft.textContent = "";
        }
        list.append(messageNode(message));
        scrollDown();
        break;
      case "delta":
        live.hidden = false;
        draft.textContent += message.text;
        scrollDown();
        break;
      case "step":
        draft.textContent = "";
        break;
      case "tool": {
        live.hidden = false;
        const label = message.state === "started" ? "⚙ " + message.name + "…" : (message.state === "ok" ? "✓ " : "✗ ") + message.name + (message.ms !== undefined ? " (" + message.ms + " ms)" : "");
        tools.append(el("div", { class: "tool " + message.state }, label));
        break;
      }
      case "approval":
        showApproval(message);
        break;
      case "approval_resolved":
        resolveApproval(message);
        break;
      case "busy":
        setBusy(message.busy);
        break;
      case "error":
        status.textContent = message.error;
        status.classList.add("error");
        break;
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    let opened = false;
    socket = new WebSocket(scheme + location.host + "/chat/ws?c=" + encodeURIComponent(chatId), ["minibot.chat", "auth." + token]);
    socket.addEventListener("open", () => {
      opened = true;
      retry = 500;
      status.textContent = "Connected.";
      status.classList.remove("error");
      root.dataset.connected = "true";
    });
    socket.addEventListener("message", onMessage);
    socket.addEventListener("close", async () => {
      root.dataset.connected = "false";
      // What was shown stays on the page; only Stop goes, since there is nothing to send it to.
      stop.disabled = true;
      if (!opened) {
        // Refused, not dropped: the server restarted (this page's chat token is from before) or the login
        // ended. When the server answers again, a fresh page has the new token (or the login form).
        try {
          const health = await fetch("/health", { cache: "no-store" });
          if (health.ok) {
            location.reload();
            return;
          }
        } catch (error) {
          // Still down: try again below.
        }
      }
      status.textContent = "Disconnected; reconnecting…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    });
  }

  function send(message) {
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      status.textContent = "Not connected; the message was not sent.";
      status.classList.add("error");
      return false;
    }
    socket.send(JSON.stringify(message));
    return true;
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = text.value;
    if (!value.trim() && uploads.length === 0) return;
    if (value.trim() === "/stop") {
      send({ kind: "stop" });
      text.value = "";
      return;
    }
    const ids = uploads.map((u) => u.upload_id);
    if (send({ kind: "message", text: value, upload_ids: ids })) {
      const names = uploads.map((u) => u.name);
      const shown = names.length ? value + (value ? "\n" : "") + "Attached: " + names.join(", ") : value;
      list.append(messageNode({ role: "user", text: shown }));
      text.value = "";
      uploads = [];
      pending.replaceChildren();
      scrollDown();
    }
  });

  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  stop.addEventListener("click", () => send({ kind: "stop" }));
  older.addEventListener("click", () => {
    if (olderId !== null) send({ kind: "history_before", before_id: olderId });
  });

  if (files) files.addEventListener("change", async () => {
    for (const file of Array.from(files.files)) {
      if (uploads.length >= maxAttachments) {
        status.textContent = "At most " + maxAttachments + " attachments per message.";
        status.classList.add("error");
        break;
      }
      const item = el("li", {}, file.name + " (uploading…)");
      pending.append(item);
      try {
        const response = await fetch("/chat/upload?c=" + encodeURIComponent(chatId), {
          method: "POST",
          headers: { "Content-Type": file.type || "application/octet-stream", "X-File-Name": encodeURIComponent(file.name) },
          body: file,
          credentials: "same-origin",
        });
        const body = await response.json().catch(() => ({ error: "HTTP " + response.status }));
        if (!response.ok) throw new Error(body.error || "HTTP " + response.status);
        uploads.push(body);
        item.textContent = body.name + " ✓";
      } catch (error) {
        item.textContent = file.name + ": " + error.message;
        item.classList.add("error");
      }
    }
    files.value = "";
  });

  connect();
}
