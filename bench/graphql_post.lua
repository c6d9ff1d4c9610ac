-- wrk script of bench/graphql_bench.py: POSTs a processCreate body, cycling through `count` process ids so
-- concurrent requests do not all wait for the lock of one document. With `changing` = 1 each request's process name
-- carries a request number, so every request changes its process (a new revision each time); otherwise a body
-- repeats once every `count` requests (an unchanged push from the second round on, on versions that detect them).
--   wrk -t1 -c8 -d10s -s bench/graphql_post.lua <url>/graph/v2 -- <body file> <token> [count] [changing]
local bodies = {}
local next_body = 0
local token = ""
local changing = false
local sent = 0
local NAME = "Gearbox housing, final assembly"

function init(args)
  local handle = assert(io.open(args[1], "rb"))
  local template = handle:read("*a")
  handle:close()
  token = args[2]
  changing = args[4] == "1"
  for i = 1, tonumber(args[3] or "64") do
    local body = template:gsub("bench_process", string.format("bench_process_%03d", i), 1)
    local first, last = body:find(NAME, 1, true)
    bodies[i] = {body:sub(1, last), body:sub(last + 1)}
  end
end

function request()
  next_body = next_body % #bodies + 1
  sent = sent + 1
  local parts = bodies[next_body]
  local body = parts[1] .. parts[2]
  if changing then
    body = parts[1] .. " " .. sent .. parts[2]
  end
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["x-service-api-org"] = token}, body)
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format("RESULT requests=%d seconds=%.3f p50_ms=%.3f p99_ms=%.3f failed=%d\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    errors.connect + errors.read + errors.write + errors.timeout + errors.status))
end
