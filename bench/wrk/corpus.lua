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
