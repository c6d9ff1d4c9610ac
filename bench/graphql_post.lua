-- wrk script of bench/graphql_bench.py: POSTs a processCreate body, cycling through `count` process ids so
-- concurrent requests do not all wait for the lock of one document.
--   wrk -t1 -c8 -d10s -s bench/graphql_post.lua <url>/graph/v2 -- <body file> <token> [count]
local bodies = {}
local next_body = 0
local token = ""

function init(args)
  local handle = assert(io.open(args[1], "rb"))
  local template = handle:read("*a")
  handle:close()
  token = args[2]
  for i = 1, tonumber(args[3] or "64") do
    bodies[i] = template:gsub("bench_process", string.format("bench_process_%03d", i), 1)
  end
end

function request()
  next_body = next_body % #bodies + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["x-service-api-org"] = token},
                    bodies[next_body])
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format("RESULT requests=%d seconds=%.3f p50_ms=%.3f p99_ms=%.3f failed=%d\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    errors.connect + errors.read + errors.write + errors.timeout + errors.status))
end
