-- wrk script for the benchmark: sends raw requests verbatim, from one of two sources.
--
-- Fixed corpus: BENCH_FILES (environment) is a comma-separated list of files of
-- bench/corpus/; a file listed several times is sent that many times per cycle, so the
-- list also sets the mix. The requests are sent in list order, round-robin, on every
-- connection.
--
-- Varying corpus: BENCH_VARYING_DIR is a directory written by bench/gen_varying.py
-- (manifest.tsv and one file per request) and BENCH_VARYING_KINDS a comma-separated list
-- of the generator's kinds to send (get-page, get-asset, get-api, form, multipart, json).
-- The requests of those kinds are sent in a shuffled order drawn from BENCH_SEED
-- (default 1), a new order for every pass over them; the thread's connections take the
-- next request of that one sequence as they become free, so no two connections send
-- the same request at the same time and every request is sent once per pass.

local requests = {}
local n = 0
local i = 0
local shuffled = false

local function load(path)
   local f = assert(io.open(path, "rb"), "cannot open " .. path)
   local data = f:read("*a")
   f:close()
   return data
end

-- Fisher-Yates with wrk's LuaJIT generator, seeded in init.
local function shuffle()
   for k = n, 2, -1 do
      local j = math.random(k)
      requests[k], requests[j] = requests[j], requests[k]
   end
end

local function load_varying(dir, kinds)
   local want = {}
   for kind in string.gmatch(kinds, "[^,]+") do
      want[kind] = true
   end
   local manifest = assert(io.open(dir .. "/manifest.tsv", "r"),
      "cannot open " .. dir .. "/manifest.tsv (run bench/gen_varying.py)")
   for line in manifest:lines() do
      local file, kind = string.match(line, "^([^#\t][^\t]*)\t([^\t]+)\t")
      if file and want[kind] then
         n = n + 1
         requests[n] = load(dir .. "/" .. file)
      end
   end
   manifest:close()
end

function init(args)
   local dir = os.getenv("BENCH_VARYING_DIR")
   if dir then
      load_varying(dir, os.getenv("BENCH_VARYING_KINDS") or "")
      assert(n > 0, "BENCH_VARYING_KINDS names no request of " .. dir)
      math.randomseed(tonumber(os.getenv("BENCH_SEED") or "1"))
      shuffle()
      shuffled = true
      return
   end
   local cache = {}
   for path in string.gmatch(os.getenv("BENCH_FILES") or "", "[^,]+") do
      cache[path] = cache[path] or load(path)
      n = n + 1
      requests[n] = cache[path]
   end
   assert(n > 0, "BENCH_FILES names no request")
   -- Connections start at different points of the cycle.
   i = math.random(n) - 1
end

function request()
   if shuffled and i == n then
      shuffle()
      i = 0
   end
   i = i % n + 1
   return requests[i]
end

-- With BENCH_COUNT_STATUS set, count the answers per status code and print them at the
-- end as "statuses: 200=N 403=M" (only for the mix: it costs wrk a Lua call per answer).
if os.getenv("BENCH_COUNT_STATUS") then
   local threads = {}
   statuses = {}

   function setup(thread)
      table.insert(threads, thread)
   end

   function response(status, headers, body)
      statuses[status] = (statuses[status] or 0) + 1
   end

   function done(summary, latency, reqs)
      local total = {}
      for _, t in ipairs(threads) do
         for code, n in pairs(t:get("statuses")) do
            total[code] = (total[code] or 0) + n
         end
      end
      local codes = {}
      for code in pairs(total) do
         table.insert(codes, code)
      end
      table.sort(codes)
      local out = {}
      for _, code in ipairs(codes) do
         table.insert(out, code .. "=" .. total[code])
      end
      io.write("statuses: " .. table.concat(out, " ") .. "\n")
   end
end
