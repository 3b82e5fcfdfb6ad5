-- Two Python buffers in Neovim (0.7+) with docs/lsp.md's 0.7-0.10 snippet as the configuration
-- (the test writes it to SPECDEC_INIT and sources it first): open SPECDEC_FILE_A, then
-- SPECDEC_FILE_B, wait until the client is initialized, ask for completion in the second buffer
-- at SPECDEC_LINE:SPECDEC_COL (0-based) until an item arrives (the model loads after
-- `initialized`; until then the answer is empty), and write to SPECDEC_OUT: the clients, each
-- buffer's attached client ids, the server processes' ids (and Neovim's child processes), the
-- items and how many requests it took.
local out = os.getenv("SPECDEC_OUT")
local function finish(value)
  local f = io.open(out, "w")
  f:write(vim.fn.json_encode(value))
  f:close()
  vim.cmd("qall!")
end

vim.cmd("source " .. os.getenv("SPECDEC_INIT"))
vim.cmd("edit " .. os.getenv("SPECDEC_FILE_A"))
local a = vim.api.nvim_get_current_buf()
vim.cmd("edit " .. os.getenv("SPECDEC_FILE_B"))
local b = vim.api.nvim_get_current_buf()

local ok = vim.wait(120000, function()
  local clients = vim.lsp.get_active_clients()
  return #clients > 0 and clients[1].initialized
end, 50)
if not ok then finish({ error = "not initialized" }) end

local function ids(buf)
  local got = {}
  for id, _ in pairs(vim.lsp.buf_get_clients(buf)) do table.insert(got, id) end
  return got
end

-- the servers and clients now (a second server would have started with the second buffer)
vim.wait(2000)
local children = {}
for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
  local info = vim.api.nvim_get_proc(pid)
  table.insert(children, { pid = pid, name = info and info.name or "" })
end
local clients, pids = {}, {}
for _, c in ipairs(vim.lsp.get_active_clients()) do
  table.insert(clients, { id = c.id, name = c.name })
  table.insert(pids, c.rpc.pid)
end
if #clients ~= 1 then finish({ clients = clients, pids = pids, children = children, items = {} }) end

local L, C = tonumber(os.getenv("SPECDEC_LINE")), tonumber(os.getenv("SPECDEC_COL"))
local params = { textDocument = { uri = vim.uri_from_bufnr(b) }, position = { line = L, character = C } }
local items, requests, first_empty = {}, 0, nil
local deadline = vim.loop.now() + 240000
while #items == 0 and vim.loop.now() < deadline do
  requests = requests + 1
  local results, err = vim.lsp.buf_request_sync(b, "textDocument/completion", params, 120000)
  if not results then finish({ error = tostring(err) }) end
  for _, res in pairs(results) do
    if res.err then finish({ error = vim.inspect(res.err) }) end
    for _, item in ipairs((res.result or {}).items or {}) do
      table.insert(items, { insertText = item.insertText, label = item.label })
    end
  end
  if #items == 0 then
    if first_empty == nil then first_empty = true end
    vim.wait(500)
  end
end

finish({
  clients = clients,
  pids = pids,
  children = children,
  attached = { a = ids(a), b = ids(b) },
  items = items,
  requests = requests,
  first_empty = first_empty or false,
})
