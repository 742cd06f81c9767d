--[[
Benchmark: what per-job routing (fgd-route) costs slurmctld per submission.

    cd slurm-plugins && lua5.1 ../bench/route_submit_cost.lua [nodes ...]

Loads job_submit.lua as slurmctld does (the test stub of the `slurm` table), with a route
table of N 8-GPU nodes whose first GPU is 0-100 % used (five states), a three-type mix,
and times 2,000 submissions of 1-4 GPU jobs: the first submissions of a request shape
fill the rise cache, the rest look it up. Prints milliseconds per submission.
]]
package.path = "./?.lua;" .. package.path
local H = require("tests.helper")

local function table_text(n)
  local nodes = {}
  for i = 1, n do
    nodes[i] = string.format("{ feature = 'defrag_at_n%d', model = 'v100', "
      .. "free = { %d, 1000, 1000, 1000, 1000, 1000, 1000, 1000 }, cpus = 64, "
      .. "mem = 500000, idle = false }", i, (i % 5) * 250)
  end
  return "return { version = 1, default_partition = 'p', partitions = "
    .. "{ p = { types = { { gpus = 8, nodes = " .. n .. ", models = {} } } } }, route = { "
    .. "step = 40, mix = { { cpus = 2, gpus = 1, milli = 1000, weight = 0.5 }, "
    .. "{ cpus = 4, gpus = 4, milli = 1000, weight = 0.3 }, "
    .. "{ cpus = 1, gpus = 1, milli = 250, weight = 0.2 } }, nodes = { "
    .. table.concat(nodes, ", ") .. " } } }"
end

local sizes = { ... }
if #sizes == 0 then sizes = { 1000, 4000 } end
for _, arg in ipairs(sizes) do
  local n = tonumber(arg)
  local path = H.tmpfile(table_text(n))
  local t0 = os.clock()
  H.load(path)
  local load_ms = (os.clock() - t0) * 1e3
  os.remove(path)
  local jobs = 2000
  local start = os.clock()
  for i = 1, jobs do
    H.submit({ tres_per_node = "gres:gpu:" .. (1 + i % 4), min_cpus = 2 })
  end
  local per_job = (os.clock() - start) / jobs * 1e3
  print(string.format("%s, %d nodes: table load %.0f ms, %.3f ms per submission",
    _VERSION, n, load_ms, per_job))
end
