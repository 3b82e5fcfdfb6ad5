-- Neovim (0.7+) as a real editor client of `specdec lsp`: start the server for the current buffer,
-- request completion at SPECDEC_LINE:SPECDEC_COL (0-based), write the raw result as JSON to SPECDEC_OUT.
local out = os.getenv("SPECDEC_OUT")
local function finish(value)
  local f = io.open(out, "w")
  f:write(vim.fn.json_encode(value))
  f:close()
  vim.cmd("qall!")
end

local client_id = vim.lsp.start_client({
  name = "specdec",
  cmd = { os.getenv("SPECDEC_PYTHON"), "-m", "app.cli", "lsp" },
  root_dir = vim.fn.getcwd(),
  init_options = { max_new_tokens = 16, stop = "line" },
})
if not client_id then finish({ error = "start_client failed" }) end
vim.lsp.buf_attach_client(0, client_id)
local ok = vim.wait(120000, function()
  local c = vim.lsp.get_client_by_id(client_id)
  return c ~= nil and c.initialized
end, 50)
if not ok then finish({ error = "not initialized" }) end

local params = {
  textDocument = { uri = vim.uri_from_bufnr(0) },
  position = { line = tonumber(os.getenv("SPECDEC_LINE")), character = tonumber(os.getenv("SPECDEC_COL")) },
}
local results, err = vim.lsp.buf_request_sync(0, "textDocument/completion", params, 120000)
if not results then finish({ error = tostring(err) }) end
local items = {}
for _, res in pairs(results) do
  if res.err then finish({ error = vim.inspect(res.err) }) end
  for _, item in ipairs((res.result or {}).items or {}) do
    table.insert(items, { insertText = item.insertText, label = item.label })
  end
end
vim.lsp.stop_client(client_id)
finish({ items = items })
