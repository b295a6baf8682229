-- One benchmark scenario for wrk, read from a request file written by run.py.
--
-- Usage: wrk -s scenario.lua http://127.0.0.1:PORT -- REQUEST_FILE
--
-- The request file has one item per line:
--   H Name: value            a header sent with every request
--   R METHOD PATH [BODY]     a request; BODY is one line of JSON
-- Requests are pre-formatted in init() and sent in turn, each thread starting
-- at a different place in the list, so that scenarios which must vary ids
-- (layer memberships) do, at the cost of one table lookup per request.
-- A header value holding %RANDOM% instead gets 43 fresh random letters in
-- every request (a key the server has never seen), formatted as it is sent.
--
-- done() prints one line, "WRK_RESULT {json}", which run.py parses: counts,
-- duration, latency percentiles (microseconds) and HTTP statuses by class.

local threads = {}
local thread_count = 0

function setup(thread)
   thread_count = thread_count + 1
   thread:set("thread_number", thread_count)
   table.insert(threads, thread)
end

local function read_request_file(path)
   local file = assert(io.open(path, "r"))
   local headers, items = {}, {}
   for line in file:lines() do
      local kind, rest = line:sub(1, 1), line:sub(3)
      if kind == "H" then
         local name, value = rest:match("^([^:]+):%s*(.*)$")
         headers[name] = value
      elseif kind == "R" then
         local method, path, body = rest:match("^(%S+) (%S+) ?(.*)$")
         if body == "" then body = nil end
         table.insert(items, { method = method, path = path, body = body })
      end
   end
   file:close()
   return headers, items
end

local RANDOM = "%RANDOM%"
local LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

local function random_letters(count)
   local letters = {}
   for i = 1, count do
      local at = math.random(#LETTERS)
      letters[i] = LETTERS:sub(at, at)
   end
   return table.concat(letters)
end

local function fresh_request()
   local copy = {}
   for name, value in pairs(fresh.headers) do
      local at = value:find(RANDOM, 1, true)
      if at then
         value = value:sub(1, at - 1) .. random_letters(43) .. value:sub(at + #RANDOM)
      end
      copy[name] = value
   end
   local item = fresh.items[position]
   return wrk.format(item.method, item.path, copy, item.body)
end

function init(args)
   local headers, items = read_request_file(args[1])
   for _, value in pairs(headers) do
      if value:find(RANDOM, 1, true) then
         math.randomseed(os.time() * 100 + thread_number)
         fresh = { headers = headers, items = items }
      end
   end
   prepared = {}
   for i, item in ipairs(items) do
      local copy = {}
      for name, value in pairs(headers) do copy[name] = value end
      prepared[i] = wrk.format(item.method, item.path, copy, item.body)
   end
   -- Threads start far apart in the list so they rarely send the same item.
   position = ((thread_number - 1) * math.floor(#prepared / 2)) % #prepared
   s2xx, s401, s429, s4xx, s5xx, sother = 0, 0, 0, 0, 0, 0
end

function request()
   position = position % #prepared + 1
   if fresh then
      return fresh_request()
   end
   return prepared[position]
end

function response(status, headers, body)
   if status >= 200 and status < 300 then s2xx = s2xx + 1
   elseif status == 401 then s401 = s401 + 1
   elseif status == 429 then s429 = s429 + 1
   elseif status >= 400 and status < 500 then s4xx = s4xx + 1
   elseif status >= 500 then s5xx = s5xx + 1
   else sother = sother + 1 end
end

function done(summary, latency, requests)
   local statuses = { s2xx = 0, s401 = 0, s429 = 0, s4xx = 0, s5xx = 0, sother = 0 }
   for _, thread in ipairs(threads) do
      for name, _ in pairs(statuses) do
         statuses[name] = statuses[name] + (thread:get(name) or 0)
      end
   end
   local errors = summary.errors
   io.write(string.format(
      'WRK_RESULT {"requests": %d, "duration_us": %d, "p50_us": %d, "p90_us": %d, ' ..
      '"p99_us": %d, "mean_us": %.1f, "max_us": %d, "socket_errors": %d, "timeouts": %d, ' ..
      '"s2xx": %d, "s401": %d, "s429": %d, "s4xx": %d, "s5xx": %d, "sother": %d}\n',
      summary.requests, summary.duration,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.mean, latency.max,
      errors.connect + errors.read + errors.write, errors.timeout,
      statuses.s2xx, statuses.s401, statuses.s429, statuses.s4xx, statuses.s5xx, statuses.sother))
end
