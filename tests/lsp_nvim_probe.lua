-- Neovim (0.7+) as a real editor client of `specdec lsp`: start the server for the current buffer,
-- request completion at SPECDEC_LINE:SPECDEC_COL (0-based), accept the first item the way the
-- omnifunc of docs/lsp.md does (vim.lsp.util's complete-items, then complete() in insert
-- mode: it inserts the first match; <Esc> keeps it), and write the raw items and the buffer's lines as JSON to SPECDEC_OUT.
local out = os.getenv("SPECDEC_OUT")
local function finish(value)
  local f = io.open(out, "w")
  f:write(vim.fn.json_encode(value))
  f:close()
  vim.cmd("qall!")
end

local client_id = vim.lsp.start_client({
  name = "specdec",
  cmd = { os.getenv("SPECDEC_PYTHON"), "-m", "specdec", "lsp" },
  root_dir = vim.fn.getcwd(),
  -- initialize answers once the model is loaded (docs/lsp.md): the request below is the model's
  init_options = { max_new_tokens = 16, stop = os.getenv("SPECDEC_STOP") or "line", wait_for_model = true },
})
if not client_id then finish({ error = "start_client failed" }) end
vim.lsp.buf_attach_client(0, client_id)
local ok = vim.wait(120000, function()
  local c = vim.lsp.get_client_by_id(client_id)
  return c ~= nil and c.initialized
end, 50)
if not ok then finish({ error = "not initialized" }) end

local L, C = tonumber(os.getenv("SPECDEC_LINE")), tonumber(os.getenv("SPECDEC_COL"))
local params = { textDocument = { uri = vim.uri_from_bufnr(0) }, position = { line = L, character = C } }
local results, err = vim.lsp.buf_request_sync(0, "textDocument/completion", params, 120000)
if not results then finish({ error = tostring(err) }) end
local items, result = {}, nil
for _, res in pairs(results) do
  if res.err then finish({ error = vim.inspect(res.err) }) end
  result = res.result
  for _, item in ipairs((res.result or {}).items or {}) do
    table.insert(items, { insertText = item.insertText, label = item.label })
  end
end
vim.lsp.stop_client(client_id)

local line = vim.api.nvim_buf_get_lines(0, L, L + 1, false)[1]
local word = vim.fn.matchstr(line:sub(1, C), "\\k*$")
_G.specdec_matches = vim.lsp.util.text_document_completion_list_to_complete_items(result or {}, word)
_G.specdec_start = C - #word + 1
vim.cmd("inoremap <F5> <Cmd>lua vim.fn.complete(_G.specdec_start, _G.specdec_matches)<CR>")
local keys
if C >= #line then
  vim.api.nvim_win_set_cursor(0, { L + 1, math.max(0, #line - 1) })
  keys = "A<F5><Esc>"
else
  vim.api.nvim_win_set_cursor(0, { L + 1, C })
  keys = "i<F5><Esc>"
end
if #_G.specdec_matches > 0 then
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "xt", false)
end
finish({ items = items, buffer = vim.api.nvim_buf_get_lines(0, 0, -1, false) })
