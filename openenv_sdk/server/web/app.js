// The openenv playground: plays one environment server through its public routes only.
//
//   GET  /metadata, /schema, /health          what the environment is, its models and tools
//   POST /sessions                            a session: its id and the agent's MCP token
//   POST /reset, /step   GET /state           the orchestrator's API (X-OpenEnv-Session header)
//   POST /call/transcript                     the agent's tool calls in this episode
//   POST /mcp?session=<mcp_token>             tools/call as plain JSON-RPC: the agent's path
//
// No framework, no build step, nothing fetched from elsewhere. Every value shown is set with
// textContent, never parsed as HTML.
"use strict";

// The server's root, keeping any path prefix a proxy adds: this page is served at <root>/web/.
const ROOT = new URL("..", window.location.href);

const page = {
  schema: null,
  sessionId: null,
  mcpToken: null,
  rpcId: 0,
  events: [], // the orchestrator's reset/step of this episode, each with `toolsBefore`
  toolCalls: [], // the server's transcript of the episode's tool calls
};

// --- small helpers ----------------------------------------------------------------------------

function $(id) {
  return document.getElementById(id);
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function pretty(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function busy(button, on) {
  if (button) button.disabled = on;
  document.body.classList.toggle("busy", on);
}

// --- errors -------------------------------------------------------------------------------------

// A refused request, as the server types it: `code` (VALIDATION_ERROR, NOT_RESET, ...), a
// message, and pydantic's field errors when there are any.
class PlaygroundError extends Error {
  constructor(code, message, { status = null, errors = null, where = "server" } = {}) {
    super(message);
    this.code = code;
    this.status = status;
    this.errors = errors;
    this.where = where;
  }
}

function asPlaygroundError(error) {
  if (error instanceof PlaygroundError) return error;
  return new PlaygroundError("PAGE_ERROR", String(error && error.message ? error.message : error), { where: "page" });
}

function errorBox(error) {
  error = asPlaygroundError(error);
  const head = el(
    "div",
    { class: "error-head" },
    el("span", { class: "code", text: error.code }),
    error.status ? el("span", { class: "status", text: `HTTP ${error.status}` }) : null,
    error.where === "page" ? el("span", { class: "status", text: "checked in this page, not sent" }) : null,
  );
  const list = Array.isArray(error.errors) && error.errors.length
    ? el(
        "ul",
        { class: "field-errors" },
        error.errors.map((e) =>
          el("li", {}, el("code", { text: (e.loc || []).join(".") || "(body)" }), " ", e.msg || pretty(e)),
        ),
      )
    : null;
  return el("div", { class: "error", role: "alert" }, head, el("p", { class: "message", text: error.message }), list);
}

function show(target, ...nodes) {
  target.replaceChildren(...nodes);
}

// --- the server's public API --------------------------------------------------------------------

async function http(method, path, body, { session = true } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (session && page.sessionId) headers["X-OpenEnv-Session"] = page.sessionId;
  let response;
  try {
    response = await fetch(new URL(path, ROOT), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit", // the session is named by the header, never by a cookie
    });
  } catch (e) {
    throw new PlaygroundError("TRANSPORT_ERROR", `The server cannot be reached: ${e.message}`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!response.ok) {
    const detail = data && typeof data === "object" ? data.detail : null;
    if (detail && typeof detail === "object" && detail.code) {
      throw new PlaygroundError(detail.code, detail.message, { status: response.status, errors: detail.errors });
    }
    const message = typeof detail === "string" ? detail : text || response.statusText;
    throw new PlaygroundError(`HTTP_${response.status}`, message, { status: response.status });
  }
  return data;
}

async function mcpCall(name, args) {
  // Plain JSON-RPC (no MCP session): the server answers it directly, in the episode the token names.
  const url = new URL("mcp", ROOT);
  url.searchParams.set("session", page.mcpToken);
  const reply = await http(
    "POST",
    url.pathname + url.search,
    { jsonrpc: "2.0", id: ++page.rpcId, method: "tools/call", params: { name, arguments: args } },
    { session: false },
  );
  if (reply.error) {
    throw new PlaygroundError(`JSON-RPC ${reply.error.code}`, reply.error.message);
  }
  return reply.result;
}

async function ensureSession() {
  if (page.sessionId) return;
  const info = await http("POST", "sessions", undefined, { session: false });
  setSession(info.session_id, info.mcp_token, info.mcp_path);
}

function setSession(sessionId, mcpToken, mcpPath = "/mcp") {
  page.sessionId = sessionId;
  page.mcpToken = mcpToken;
  $("close-button").disabled = !sessionId;
  $("session-id").textContent = sessionId || "none yet: reset starts one";
  if (sessionId) {
    const url = new URL(mcpPath.replace(/^\//, ""), ROOT);
    url.searchParams.set("session", mcpToken);
    $("mcp-url").textContent = url.toString();
  } else {
    $("mcp-url").textContent = "none yet";
  }
}

// --- forms from JSON Schemas --------------------------------------------------------------------

function resolveRef(schema, root) {
  let seen = 0;
  while (schema && schema.$ref && seen++ < 32) {
    const name = schema.$ref.split("/").pop();
    schema = ((root && (root.$defs || root.definitions)) || {})[name] || {};
  }
  return schema || {};
}

// What input a schema gets: string, integer, number, boolean, enum, or json (anything else).
function fieldKind(schema, root) {
  schema = resolveRef(schema, root);
  const variants = schema.anyOf || schema.oneOf;
  if (variants) {
    const real = variants.filter((v) => resolveRef(v, root).type !== "null");
    if (real.length === 1) return { ...fieldKind(real[0], root), nullable: real.length < variants.length };
    return { kind: "json", schema };
  }
  if (Array.isArray(schema.enum)) return { kind: "enum", options: schema.enum, schema };
  if (schema.const !== undefined) return { kind: "enum", options: [schema.const], schema };
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if (["string", "integer", "number", "boolean"].includes(type)) return { kind: type, schema };
  return { kind: "json", schema };
}

function typeLabel(field) {
  if (field.kind === "enum") return "one of " + field.options.map((o) => JSON.stringify(o)).join(", ");
  if (field.kind === "json") {
    const type = field.schema.type;
    return type === "array" ? "JSON array" : type === "object" ? "JSON object" : "JSON";
  }
  return field.kind;
}

// Build the inputs of an object schema into `container`; return a function that reads the
// arguments back (omitting optional fields left empty). Names are prefixed with `idPrefix`.
function buildFields(container, schema, idPrefix) {
  const root = schema;
  schema = resolveRef(schema, root);
  const properties = schema.properties || {};
  const required = new Set(schema.required || []);
  const readers = [];
  const names = Object.keys(properties);
  const optional = names.filter((n) => !required.has(n));
  const moreBox = required.size && optional.length
    ? el("details", { class: "optional" }, el("summary", { text: `optional fields (${optional.length})` }))
    : null;

  for (const name of names) {
    const prop = resolveRef(properties[name], root);
    const field = fieldKind(properties[name], root);
    const isRequired = required.has(name);
    const id = `${idPrefix}-${name}`;
    const description = properties[name].description || prop.description || "";
    const hasDefault = Object.prototype.hasOwnProperty.call(properties[name], "default");
    const defaultValue = properties[name].default;
    let input;
    let read;

    if (field.kind === "boolean") {
      input = el("input", { id, name, type: "checkbox", checked: defaultValue === true });
      read = () => (isRequired || input.checked !== (defaultValue === true) ? input.checked : undefined);
    } else if (field.kind === "enum") {
      input = el(
        "select",
        { id, name },
        isRequired ? null : el("option", { value: "", text: "(default)" }),
        field.options.map((option, i) => el("option", { value: String(i), text: JSON.stringify(option) })),
      );
      if (hasDefault) {
        const index = field.options.findIndex((o) => JSON.stringify(o) === JSON.stringify(defaultValue));
        if (index >= 0 && isRequired) input.value = String(index);
      }
      read = () => (input.value === "" ? undefined : field.options[Number(input.value)]);
    } else if (field.kind === "integer" || field.kind === "number") {
      const s = field.schema;
      input = el("input", {
        id,
        name,
        type: "number",
        step: field.kind === "integer" ? "1" : "any",
        min: s.minimum ?? s.exclusiveMinimum,
        max: s.maximum ?? s.exclusiveMaximum,
        placeholder: hasDefault && defaultValue !== null ? `default ${defaultValue}` : isRequired ? "" : "optional",
      });
      read = () => (input.value === "" ? undefined : Number(input.value));
    } else if (field.kind === "string") {
      input = el("textarea", {
        id,
        name,
        rows: 1,
        spellcheck: "false",
        placeholder: hasDefault && defaultValue !== null ? `default ${JSON.stringify(defaultValue)}` : "",
      });
      input.addEventListener("input", () => {
        input.style.height = "auto";
        input.style.height = `${input.scrollHeight + 2}px`;
      });
      // A required string is sent even when empty (the empty string is a value).
      read = () => (input.value === "" && !isRequired ? undefined : input.value);
    } else {
      input = el("textarea", {
        id,
        name,
        rows: 2,
        spellcheck: "false",
        class: "json-input",
        placeholder: hasDefault ? JSON.stringify(defaultValue) : typeLabel(field),
      });
      read = () => {
        if (input.value.trim() === "") return undefined;
        try {
          return JSON.parse(input.value);
        } catch (e) {
          throw new PlaygroundError("INVALID_JSON", `${name}: not valid JSON (${e.message})`, { where: "page" });
        }
      };
    }

    const label = el(
      "label",
      { class: "field", for: id },
      el(
        "span",
        { class: "name" },
        name,
        isRequired ? el("span", { class: "required", title: "required", text: "*" }) : null,
        " ",
        el("span", { class: "type", text: typeLabel(field) + (field.nullable ? " or null" : "") }),
      ),
      input,
      description ? el("span", { class: "description", text: description }) : null,
    );
    (moreBox && !isRequired ? moreBox : container).append(label);
    readers.push([name, read]);
  }
  if (moreBox) container.append(moreBox);
  if (!names.length) container.append(el("p", { class: "muted", text: "No arguments." }));

  return () => {
    const values = {};
    for (const [name, read] of readers) {
      const value = read();
      if (value !== undefined) values[name] = value;
    }
    return values;
  };
}

// --- rendering results --------------------------------------------------------------------------

function stepResultView(result) {
  const badges = el(
    "div",
    { class: "badges" },
    el("span", { class: "badge", text: `reward ${result.reward === null || result.reward === undefined ? "—" : result.reward}` }),
    el("span", { class: result.done ? "badge done" : "badge", text: result.done ? "done" : "not done" }),
  );
  return el("div", { class: "result" }, badges, el("pre", { class: "json", text: pretty(result.observation) }));
}

function toolResultView(result) {
  const text = (result.content || [])
    .map((part) => (part.type === "text" ? part.text : pretty(part)))
    .join("\n");
  const body = [el("pre", { class: "tool-text", text: text || "(no content)" })];
  if (result.structuredContent !== undefined && result.structuredContent !== null) {
    body.push(el("details", {}, el("summary", { text: "structuredContent" }), el("pre", { class: "json", text: pretty(result.structuredContent) })));
  }
  if (result.isError) {
    return el(
      "div",
      { class: "result tool-error", role: "alert" },
      el("div", { class: "error-head" }, el("span", { class: "code", text: "tool error" }), el("span", { class: "status", text: "isError: true; the episode goes on" })),
      body,
    );
  }
  return el("div", { class: "result ok" }, body);
}

function renderTranscript() {
  const list = $("transcript-list");
  const items = [];
  let tool = 0;
  const pushTools = (upTo) => {
    for (; tool < Math.min(upTo, page.toolCalls.length); tool++) items.push(toolEntry(page.toolCalls[tool], tool));
  };
  for (const event of page.events) {
    pushTools(event.toolsBefore);
    items.push(eventEntry(event));
  }
  pushTools(page.toolCalls.length);
  list.replaceChildren(...items);
  $("transcript-empty").hidden = items.length > 0;
}

function eventEntry(event) {
  const head = el("div", { class: "entry-head" }, el("span", { class: `tag ${event.kind}`, text: event.kind }), el("code", { text: JSON.stringify(event.input) }));
  let body;
  if (event.error) {
    head.append(el("span", { class: "badge bad", text: event.error.code }));
    body = el("p", { class: "message", text: event.error.message });
  } else {
    const r = event.result;
    if (r.reward !== null && r.reward !== undefined) head.append(el("span", { class: "badge", text: `reward ${r.reward}` }));
    if (r.done) head.append(el("span", { class: "badge done", text: "done" }));
    body = el("pre", { class: "json", text: pretty(r.observation) });
  }
  return el("li", { class: `entry ${event.error ? "failed" : ""}`, dataset: { kind: event.kind } }, head, body);
}

function toolEntry(call) {
  const head = el(
    "div",
    { class: "entry-head" },
    el("span", { class: "tag tool", text: call.source === "mcp" ? "agent · mcp" : `tool · ${call.source}` }),
    el("code", { text: `${call.tool}(${JSON.stringify(call.arguments)})` }),
  );
  let body;
  if (call.error) {
    head.append(el("span", { class: "badge bad", text: "tool error" }));
    body = el("p", { class: "message", text: call.error });
  } else {
    body = el("pre", { class: "tool-text", text: call.output ?? "" });
  }
  return el("li", { class: `entry ${call.error ? "failed" : ""}`, dataset: { kind: "tool" } }, head, body);
}

// --- actions ------------------------------------------------------------------------------------

async function refresh() {
  if (!page.sessionId) return;
  const [state, transcript] = await Promise.allSettled([http("GET", "state"), http("POST", "call/transcript", { arguments: {} })]);
  if (state.status === "fulfilled") {
    $("state-output").textContent = pretty(state.value);
    $("state-output").classList.remove("stale");
  } else {
    $("state-output").classList.add("stale");
  }
  if (transcript.status === "fulfilled" && Array.isArray(transcript.value.result)) {
    // Tool calls made from `step` are shown with their step already.
    page.toolCalls = transcript.value.result.filter((call) => call.source !== "step");
  }
  renderTranscript();
}

async function onReset(event) {
  event.preventDefault();
  const button = $("reset-button");
  busy(button, true);
  let body;
  try {
    body = {};
    const task = $("reset-task").value.trim();
    if (task) {
      try {
        body = JSON.parse(task);
      } catch (e) {
        throw new PlaygroundError("INVALID_JSON", `task fields: not valid JSON (${e.message})`, { where: "page" });
      }
      if (!body || typeof body !== "object" || Array.isArray(body)) {
        throw new PlaygroundError("INVALID_JSON", "task fields: give a JSON object, e.g. {\"task_id\": 7}", { where: "page" });
      }
    }
    const seed = $("reset-seed").value;
    if (seed !== "") body.seed = Number(seed);
    await ensureSession();
    let result;
    try {
      result = await http("POST", "reset", body);
    } catch (e) {
      if (!(e instanceof PlaygroundError) || e.code !== "SESSION_NOT_FOUND") throw e;
      setSession(null, null); // the idle reaper closed it: start another
      await ensureSession();
      result = await http("POST", "reset", body);
    }
    page.events = [{ kind: "reset", input: body, result, toolsBefore: 0 }];
    page.toolCalls = [];
    show($("reset-output"), el("p", { class: "ok-line", text: "Episode started." }), stepResultView(result));
    show($("step-output"));
  } catch (e) {
    show($("reset-output"), errorBox(e));
  } finally {
    busy(button, false);
    await refresh();
  }
}

function readAction() {
  if ($("action-raw-toggle").checked) {
    try {
      return JSON.parse($("action-raw").value);
    } catch (e) {
      throw new PlaygroundError("INVALID_JSON", `action: not valid JSON (${e.message})`, { where: "page" });
    }
  }
  return page.readAction();
}

async function onStep(event) {
  event.preventDefault();
  const button = $("step-button");
  busy(button, true);
  let action;
  try {
    action = readAction();
    if (!page.sessionId) {
      throw new PlaygroundError("SESSION_REQUIRED", "No episode yet: press Reset first.", { where: "page" });
    }
    const result = await http("POST", "step", { action });
    page.events.push({ kind: "step", input: action, result, toolsBefore: page.toolCalls.length });
    show($("step-output"), stepResultView(result));
  } catch (e) {
    const error = asPlaygroundError(e);
    if (error.where !== "page") page.events.push({ kind: "step", input: action, error, toolsBefore: page.toolCalls.length });
    show($("step-output"), errorBox(error));
  } finally {
    busy(button, false);
    await refresh();
  }
}

async function onTool(event, name, read, output) {
  event.preventDefault();
  const button = event.submitter || event.target.querySelector("button");
  busy(button, true);
  try {
    const args = read();
    if (!page.mcpToken) {
      throw new PlaygroundError("SESSION_REQUIRED", "No episode yet: press Reset first; tool calls act in its episode.", { where: "page" });
    }
    show(output, toolResultView(await mcpCall(name, args)));
  } catch (e) {
    show(output, errorBox(e));
  } finally {
    busy(button, false);
    await refresh();
  }
}

async function onClose() {
  const button = $("close-button");
  busy(button, true);
  try {
    await http("POST", "close");
    show($("reset-output"), el("p", { class: "muted", text: "Session ended. Reset starts a new one." }));
  } catch (e) {
    show($("reset-output"), errorBox(e));
  } finally {
    setSession(null, null);
    page.events = [];
    page.toolCalls = [];
    renderTranscript();
    $("state-output").textContent = "No episode yet.";
    busy(button, false);
  }
}

async function onState() {
  if (!page.sessionId) return;
  try {
    $("state-output").textContent = pretty(await http("GET", "state"));
  } catch (e) {
    show($("state-output"), errorBox(e));
  }
}

// --- start --------------------------------------------------------------------------------------

function renderTools(tools) {
  const list = $("tool-list");
  if (!tools.length) {
    list.append(el("p", { class: "muted", text: "This environment has no tools." }));
    return;
  }
  for (const tool of tools) {
    const fields = el("div", { class: "fields" });
    const read = buildFields(fields, tool.input_schema || {}, `tool-${tool.name}`);
    const output = el("div", { id: `tool-${tool.name}-output`, class: "output", "aria-live": "polite" });
    const form = el(
      "form",
      { class: "tool", dataset: { tool: tool.name }, autocomplete: "off" },
      fields,
      el("div", { class: "actions" }, el("button", { type: "submit", text: `Call ${tool.name}` })),
    );
    form.addEventListener("submit", (event) => onTool(event, tool.name, read, output));
    const [summary, ...rest] = (tool.description || "").split("\n\n");
    list.append(
      el(
        "details",
        { class: "tool-card", open: true, id: `tool-${tool.name}` },
        el("summary", {}, el("code", { class: "tool-name", text: tool.name }), " ", el("span", { class: "description", text: summary })),
        rest.length ? el("pre", { class: "doc", text: rest.join("\n\n") }) : null,
        form,
        output,
      ),
    );
  }
}

function renderAction(schema, tools) {
  const container = $("action-fields");
  page.readAction = buildFields(container, schema.action, "action");
  const own = Object.keys(schema.action.properties || {}).filter((n) => n !== "metadata");
  if (!own.length && tools.length) {
    // An environment made only of tools: its actions are tool calls.
    $("action-raw-toggle").checked = true;
    $("action-raw").hidden = false;
    $("action-raw").value = JSON.stringify({ tool: tools[0].name, arguments: {} }, null, 2);
    container.hidden = true;
  }
}

async function start() {
  $("reset-form").addEventListener("submit", onReset);
  $("step-form").addEventListener("submit", onStep);
  $("close-button").addEventListener("click", onClose);
  $("state-button").addEventListener("click", onState);
  $("action-raw-toggle").addEventListener("change", () => {
    const raw = $("action-raw-toggle").checked;
    if (raw) {
      try {
        $("action-raw").value = JSON.stringify(page.readAction(), null, 2);
      } catch {
        $("action-raw").value = "{}";
      }
    }
    $("action-raw").hidden = !raw;
    $("action-fields").hidden = raw;
  });

  try {
    const [metadata, schema] = await Promise.all([http("GET", "metadata"), http("GET", "schema")]);
    page.schema = schema;
    document.title = `${metadata.name} · openenv playground`;
    $("env-name").textContent = metadata.name;
    $("env-version").textContent = metadata.version ? `v${metadata.version}` : "";
    $("env-version").hidden = !metadata.version;
    $("env-description").textContent = metadata.description || "";
    if (metadata.readme_content) {
      $("readme-text").textContent = metadata.readme_content;
      $("readme").hidden = false;
    }
    renderTools(schema.tools || []);
    renderAction(schema, schema.tools || []);
    renderTranscript();
  } catch (e) {
    show($("load-error"), errorBox(e));
    $("load-error").hidden = false;
  }
  document.body.dataset.ready = "true";
}

start();
