-- wrk script for the benchmark: sends raw requests from bench/corpus/ verbatim.
--
-- BENCH_FILES (environment) is a comma-separated list of corpus files; a file listed
-- several times is sent that many times per cycle, so the list also sets the mix.
-- The requests are sent in list order, round-robin, on every connection.

local requests = {}
local n = 0
local i = 0

local function load(path)
   local f = assert(io.open(path, "rb"), "cannot open " .. path)
   local data = f:read("*a")
   f:close()
   return data
end

function init(args)
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
