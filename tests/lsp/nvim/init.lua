-- A headless Neovim that runs `torchdoctor serve` through the built-in LSP client, waits for the
-- diagnostics of the file it was started on, writes them out as JSON and quits.
-- Used by tests/lsp/test_neovim.py; works on Neovim 0.7 and later.
--
-- Environment:
--   TORCHDOCTOR_CMD         the server command as a JSON list, e.g. ["torchdoctor", "serve"]
--   TORCHDOCTOR_OUT         where to write {"attached": bool, "diagnostics": [...]}
--   TORCHDOCTOR_TIMEOUT_MS  how long to wait for diagnostics (default 30000)

local cmd = vim.fn.json_decode(vim.env.TORCHDOCTOR_CMD)
local out = vim.env.TORCHDOCTOR_OUT
local timeout = tonumber(vim.env.TORCHDOCTOR_TIMEOUT_MS or "30000")

local function write_and_quit(result)
  vim.fn.writefile({ vim.fn.json_encode(result) }, out)
  vim.cmd("qall!")
end

local function start(bufnr)
  local config = {
    name = "torchdoctor",
    cmd = cmd,
    root_dir = vim.fn.getcwd(),
    -- jedi's warm-up is not needed to read diagnostics
    init_options = { settings = { hoverSignatures = false } },
  }
  if vim.lsp.start then -- Neovim 0.8+
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  local id = vim.lsp.start_client(config)
  vim.lsp.buf_attach_client(bufnr, id)
  return id
end

vim.api.nvim_create_autocmd("VimEnter", {
  callback = function()
    local bufnr = vim.api.nvim_get_current_buf()
    local ok, id = pcall(start, bufnr)
    if not ok or id == nil then
      write_and_quit({ attached = false, error = tostring(id), diagnostics = {} })
      return
    end
    vim.wait(timeout, function()
      return #vim.diagnostic.get(bufnr) > 0
    end, 50)
    local items = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      local code = d.code
      if code == nil and d.user_data and d.user_data.lsp then
        code = d.user_data.lsp.code -- Neovim 0.7 keeps the LSP fields here
      end
      table.insert(items, {
        code = code,
        lnum = d.lnum,
        col = d.col,
        severity = d.severity,
        source = d.source,
        message = d.message,
      })
    end
    write_and_quit({ attached = true, diagnostics = items })
  end,
})
