--[[
slurm-defrag job submit hook (slurm.conf: JobSubmitPlugins=lua).

For every job that asks for GPUs it:
  1. works out the GPUs per node (--gres, --gpus-per-node, --gpus, --gpus-per-task,
     --gpus-per-socket; typed or not; Slurm 22.05 spells them "gres:gpu:4", 23.02+
     "gres/gpu:4" or "gres/gpu=4"),
  2. records what the slurm-defrag service needs in the job's AdminComment, appended to
     whatever is there:  defrag:nvlink=K defrag:gpn=K defrag:nodes=N [defrag:protect]
     (nvlink=K: K NVLink-connected GPUs per node; nvlink=0: any GPUs will do),
  3. refuses, with one line naming the limit, a request that no node of the partition can
     ever satisfy (too many GPUs per node, or an NVLink block no topology has), unless the
     user says any GPUs will do (--comment=defrag:anygpu),
  4. adds a soft packing hint (--prefer=<feature>) to small single-node GPU jobs, so they
     fill the nodes with that feature first (only where a node of each of the job's
     partitions has it: pack.partitions),
  5. honours the user opt-out --comment=defrag:protect ("never requeue this job"),
  6. with per-job routing (the service's fgd-route levers: the route file it rewrites every
     cycle, or a `route` entry in the table itself), names one node per one-node job in
     --prefer, chosen on its own copy of the cycle's free resources (see "Per-job routing"
     below).
  7. refuses users' submissions and updates that name one of the service's defrag-*
     reservations (each holds nodes for the one job the service is starting there).

What it knows about the nodes comes from defrag_nodes.lua next to this file, written by
`slurm-defrag plugins render`; this script never changes per cluster.

Rules that keep slurmctld safe (this code runs inside slurmctld, under its locks):
  * no I/O except reading defrag_nodes.lua once, when Slurm loads this script, and, with
    per-job routing on, the route file's first line at most once a second (the whole
    file only when that line changed, i.e. once per service cycle, at most 4 MiB, read
    as data, never run); both must sit on a local file system (a hung network mount
    would hang slurmctld);
  * every entry point runs under pcall: an internal error is logged and the job is
    accepted unchanged (fail open: the record and the hint are advisory, and a bug here
    must never stop a cluster from taking jobs);
  * only a request positively known to be impossible is refused (and a user's use of a
    defrag-* reservation);
  * every user-controlled field is capped before it is parsed (FIELD_CAPS), and parsed
    in one pass: no pattern over user input can backtrack (see trim());
  * Lua 5.1 compatible (Debian builds Slurm 22.05 and 24.11 against liblua5.1).
]]

local NO_VAL16 = slurm.NO_VAL16 or 65534
-- slurm_errno.h has had ESLURM_INVALID_GRES = 2072 for years; 22.05 does not export it to
-- Lua. sbatch prints its text ("Invalid generic resource (gres) specification") after our
-- own one-line message.
local ESLURM_INVALID_GRES = slurm.ESLURM_INVALID_GRES or 2072
local JOB_SHARED_NONE = slurm.JOB_SHARED_NONE or 0 -- --exclusive

-- Counts above this are not a real GPU request (and would print as 1e+20): treat as huge.
local SANE_COUNT = 65535
-- The largest nice Slurm takes, either way (NICE_OFFSET - 3): a boost is at most this.
local NICE_LIMIT = 2147483645

local TABLE_NAME = "defrag_nodes.lua"
-- Seconds between two looks at the route file's first line (its stamp).
local ROUTE_CHECK_S = 1

-- Everything below is also reachable as the global `slurm_defrag`, for the unit tests
-- (slurm-plugins/tests/) and for poking at it from a Lua prompt. Slurm itself only calls
-- slurm_job_submit and slurm_job_modify.
local D = {}
slurm_defrag = D

------------------------------------------------------------------------------------------
-- Logging. Slurm's slurm.log_* run string.format on their arguments, so a message that
-- contains a '%' from user input (a job comment, a gres string) must never be the format.
------------------------------------------------------------------------------------------

local function log_info(msg) slurm.log_info("%s", "slurm-defrag: " .. msg) end
local function log_debug(msg) slurm.log_debug("%s", "slurm-defrag: " .. msg) end
local function log_error(msg) slurm.log_error("%s", "slurm-defrag: " .. msg) end
local function log_user(msg) slurm.log_user("%s", msg) end

------------------------------------------------------------------------------------------
-- Small helpers
------------------------------------------------------------------------------------------

-- Every pattern below that reads user input is linear in it: anchored, and each repeated
-- class is followed by something it cannot match (never ".-" or ".*" followed by a part
-- that can fail further on: Lua's matcher backtracks, and the old trim's
-- "^%s*(.-)%s*$" took 3 s on 16 KiB of spaces, 38 s on 40 KB in slurmctld). trim()
-- therefore walks the bytes itself.
local SPACE = { [9] = true, [10] = true, [11] = true, [12] = true, [13] = true, [32] = true }
local function trim(s)
  local i, j = 1, #s
  while SPACE[string.byte(s, i)] do i = i + 1 end
  while j >= i and SPACE[string.byte(s, j)] do j = j - 1 end
  return string.sub(s, i, j)
end
D.trim = trim

--[[
Longest value read from each user-controlled field, in bytes: checked before anything is
parsed (this script runs before Slurm's own length checks, under slurmctld's locks). The
parsing is linear anyway; the caps bound it. A value over its cap:
  * a GPU request (tres_per_*): cannot be read, like a malformed one: refused when
    enforcing, else left to Slurm with nothing recorded;
  * --reservation: refused for users (it might hide a defrag-* name, see below);
  * any other: the job is left exactly as it is (no record, no hint), and logged.
The fields only checked for being set (prefer, features, req_nodes, exc_nodes,
dependency) are never parsed, and the job name only appears, cut short, in log lines
(tests/plugins/test_hostile_sizes.py counts the work on each, up to 1 MiB).
]]
local FIELD_CAPS = {
  tres_per_node = 4096, tres_per_socket = 4096, tres_per_job = 4096, tres_per_task = 4096,
  reservation = 4096, partition = 4096, comment = 16384, admin_comment = 16384,
}
local GPU_SPEC_CAP = FIELD_CAPS.tres_per_node
D.FIELD_CAPS = FIELD_CAPS
-- Fields over their cap leave the job as it is (the GPU fields and --reservation have
-- their own rule, above).
local PLAIN_CAPPED = { "partition", "comment", "admin_comment" }

-- User text in a message or log line: at most SHOWN bytes of it.
local SHOWN = 64
local function shown(s)
  s = tostring(s)
  if #s > SHOWN then return string.sub(s, 1, SHOWN) .. "..." end
  return s
end

-- The first field f reads that is over its cap (name, cap), or nil.
local function over_cap(f)
  for _, name in ipairs(PLAIN_CAPPED) do
    local v = f(name)
    if type(v) == "string" and #v > FIELD_CAPS[name] then return name, FIELD_CAPS[name] end
  end
  return nil
end

-- A Slurm number field that may be unset: NO_VAL/NO_VAL16/INFINITE/nil all mean "not given".
-- (Node, task and GPU counts never reach 65534, so one bound serves 16- and 32-bit fields.)
local function given(n)
  if type(n) ~= "number" or n ~= n or n <= 0 or n >= NO_VAL16 then return nil end
  return n
end

-- A memory size in MB that may be unset (NO_VAL64) or per CPU (--mem-per-cpu sets bit
-- 63): nil unless a plain per-node amount.
local function mem_mb(n)
  if type(n) ~= "number" or n ~= n or n <= 0 or n >= 2 ^ 40 then return nil end
  return n
end

local function ceil_div(a, b)
  return math.ceil(a / b)
end

-- CPUs per node a one-node job asks for: -c/--mincpus, else CPUs per task x tasks.
local function job_cpus(f)
  return given(f("min_cpus"))
    or (given(f("cpus_per_task")) or 1) * (given(f("num_tasks")) or 1)
end

-- Integers print as "4", never "4.0" (Lua 5.3+) or "1e+20".
local function int(n)
  if type(n) == "number" and n == math.floor(n) and math.abs(n) <= SANE_COUNT then
    return string.format("%d", n)
  end
  return tostring(n)
end

-- Is `word` one of the whitespace/comma separated tokens of `text`?
local function has_token(text, word)
  if type(text) ~= "string" or text == "" then return false end
  for tok in string.gmatch(text, "[^%s,;]+") do
    if tok == word then return true end
  end
  return false
end
D.has_token = has_token

-- "1-4,8" for {1,2,3,4,8}
local function format_sizes(sizes)
  local out, i = {}, 1
  while i <= #sizes do
    local j = i
    while j < #sizes and sizes[j + 1] == sizes[j] + 1 do j = j + 1 end
    if j > i then
      table.insert(out, int(sizes[i]) .. "-" .. int(sizes[j]))
    else
      table.insert(out, int(sizes[i]))
    end
    i = j + 1
  end
  return table.concat(out, ",")
end
D.format_sizes = format_sizes

------------------------------------------------------------------------------------------
-- GPU request parsing
------------------------------------------------------------------------------------------

-- Slurm multiplies count suffixes by 1024 (suffix_mult in src/common/proc_args.c).
local SUFFIX = { k = 1024, m = 1024 * 1024, g = 1024 * 1024 * 1024 }

local function parse_count(text)
  local digits, suffix = string.match(text, "^(%d+)([kKmMgG]?)$")
  if not digits then return nil end
  local n = tonumber(digits)
  if suffix ~= "" then n = n * SUFFIX[string.lower(suffix)] end
  return n
end

--[[
Parse a TRES-per-X string into the GPUs it asks for.

Accepted items (comma separated, any mix with non-GPU items, which are ignored):
  gres:gpu:4   gres:gpu:a100:2   (22.05)      gres/gpu:4  gres/gpu:a100:2  gres/gpu=1  (24.11)
  gpu:4  gpu:a100:2  gpu  gpu:a100         (no prefix; no count = 1)
Returns  count, model      model = the GPU type, nil for "any type", false when several
                           types (or typed and untyped items) are asked for at once;
         nil               when the string names no GPU at all;
         nil, nil, err     when a GPU item is malformed.
]]
local function parse_gpu_tres(spec)
  if type(spec) ~= "string" then return nil end
  if #spec > GPU_SPEC_CAP then
    return nil, nil, "longer than " .. int(GPU_SPEC_CAP) .. " characters"
  end
  local total, found, untyped = 0, false, false
  local first_type, ntypes, seen = nil, 0, {}
  for raw in string.gmatch(spec, "[^,]+") do
    local item = trim(raw)
    local body = string.match(item, "^gres[:/](.*)$") or item
    local name, rest = string.match(body, "^([%w_%.%-]+)(.*)$")
    if name == "gpu" then
      local typ, count
      if rest == "" then
        count = 1
      else
        local sep, tail = string.sub(rest, 1, 1), string.sub(rest, 2)
        if sep == ":" or sep == "=" then
          local t, c = string.match(tail, "^([%w_%.%-]+)[:=]([^:=]+)$")
          if t then
            typ, count = t, parse_count(c)
          elseif parse_count(tail) then
            count = parse_count(tail)
          elseif string.match(tail, "^[%w_%.%-]+$") then
            typ, count = tail, 1
          end
        end
      end
      -- a type starts like a name ("a100", "a100-80g"), never with "-" or "."
      if typ ~= nil and not string.match(typ, "^[%w_]") then count = nil end
      if count == nil then return nil, nil, "malformed GPU request '" .. shown(item) .. "'" end
      found = true
      total = total + count
      if typ == nil then
        untyped = true
      elseif not seen[typ] then
        seen[typ] = true
        ntypes = ntypes + 1
        first_type = first_type or typ
      end
    end
  end
  if not found then return nil end
  local model = nil
  if ntypes == 1 and not untyped then
    model = first_type
  elseif ntypes > 0 then
    model = false
  end
  return total, model
end
D.parse_gpu_tres = parse_gpu_tres

-- Does a TRES string ask for shards (a share of one GPU: gres/shard:N, shard:N)?
-- Returns the shard count (true when it cannot be read), or false.
local function asks_shards(spec)
  if type(spec) ~= "string" then return false end
  if #spec > GPU_SPEC_CAP then return true end
  for raw in string.gmatch(spec, "[^,]+") do
    local item = trim(raw)
    local body = string.match(item, "^gres[:/](.*)$") or item
    if body == "shard" then return 1 end
    if string.match(body, "^shard[:=]") then
      -- the count is what follows the last ':' or '=' (anchored at both ends: one pass)
      return parse_count(string.match(body, "^.*[:=]([^:=]*)$") or "") or true
    end
  end
  return false
end
D.asks_shards = asks_shards

------------------------------------------------------------------------------------------
-- Per-job routing (the `route` entry; the service's fgd-route lever)
------------------------------------------------------------------------------------------
--[[
The service writes, once per cycle, the free GPUs (milli-GPUs per GPU), CPUs and memory of
every routed node in cons_tres order, each node's own feature, and the workload mix. For
every one-node job this picks the node the simulator's `packing` policy would choose
(with the GPU cons_tres takes for a shard job, the lowest index with room): the
smallest rise of FGD fragmentation (Weng et al., ATC '23) in `step` milli-GPUs, then a node
already in use, then the least free GPU left, then the table's order; with `score = true`,
FGD's own rule instead (the artifact's integer score 100·sigmoid(-rise/1000), ties in the
order of each node's `rank`). The job gets
--prefer=<that node's feature> (soft: Slurm falls back to any node) and is taken off this
copy, so the next submission sees it. Until the next cycle's table the copy is only an
estimate: it misses jobs that ended and counts jobs still queued (a node looks fuller than
it is), and it misses the jobs it does not route (their own --prefer, --exclusive,
several nodes, array tasks after the first) and those Slurm put elsewhere (a node looks
emptier). Each cycle's table starts it again from what Slurm reports.
The measure is the one in src/slurm_defrag/packing/fit_classes.py, which tests compare
with this one; rises are cached per node state, so a submission costs one pass over the
nodes with a table lookup each once the common states are known.
]]

local function route_key(n)
  return n.model .. "|" .. int(n.cpus) .. "|" .. table.concat(n.free, ",")
end

-- Can task type t run on a node with these free GPUs, CPUs and model?
local function runs_on(t, free, cpus, model)
  if cpus < t.cpus then return false end
  if t.model_set and not t.model_set[model] then return false end
  local k = 0
  for i = 1, #free do
    if free[i] >= t.milli then k = k + 1 end
  end
  return k >= t.gpus
end

-- F_n in milli-GPUs: the expected free GPU capacity the mix's types cannot use.
local function frag(free, cpus, model, r)
  local total = 0
  for i = 1, #free do total = total + free[i] end
  if total == 0 then return 0 end
  local usable = 0
  for _, t in ipairs(r.mix) do
    if t.gpus > 0 and runs_on(t, free, cpus, model) then
      local s = 0
      for i = 1, #free do
        if free[i] >= t.milli then s = s + free[i] end
      end
      usable = usable + t.weight * s
    end
  end
  return total - usable / r.wsum
end
D.route_frag = frag

-- The free GPUs once req started where cons_tres puts it: lowest indices with room.
local function after(free, req)
  local out, need = {}, req.gpus
  for i = 1, #free do
    local f = free[i]
    if need > 0 and f >= req.milli then
      f = f - req.milli
      need = need - 1
    end
    out[i] = f
  end
  return out
end

-- Users choose request shapes (CPUs, shard counts), so the caches are bounded: past this
-- many entries they start again empty (they also do with every new table).
local CACHE_LIMIT = 200000

local function remember(r)
  r.cached = r.cached + 1
  if r.cached > CACHE_LIMIT then
    r.frag_cache, r.rise_cache, r.cached = {}, {}, 0
  end
end

local function node_frag(n, r)
  local f = r.frag_cache[n.key]
  if f == nil then
    f = frag(n.free, n.cpus, n.model, r)
    remember(r)
    r.frag_cache[n.key] = f
  end
  return f
end

-- Rise of FGD fragmentation if req started on node n (nil: it does not fit there).
local function route_rise(n, req, r)
  if req.model and req.model ~= n.model then return nil end
  if n.cpus < req.cpus or (n.mem >= 0 and n.mem < req.mem) then return nil end
  local t = { gpus = req.gpus, milli = req.milli, cpus = 0 }
  if not runs_on(t, n.free, n.cpus, n.model) then return nil end
  local cache = r.rise_cache[req.key]
  if cache == nil then
    cache = {}
    r.rise_cache[req.key] = cache
  end
  local v = cache[n.key]
  if v == nil then
    local before = node_frag(n, r) -- may start the caches again: write after it
    v = frag(after(n.free, req), n.cpus - req.cpus, n.model, r) - before
    remember(r)
    cache = r.rise_cache[req.key] or {}
    r.rise_cache[req.key] = cache
    cache[n.key] = v
  end
  return v
end
D.route_rise = route_rise

-- Whether node n is in one of the job's partitions (a node whose partitions the table
-- does not list, or a job with none, is not filtered).
local function in_partitions(n, parts)
  if n.part_set == nil or parts == nil or #parts == 0 then return true end
  for _, p in ipairs(parts) do
    if n.part_set[p] then return true end
  end
  return false
end

-- Index in r.nodes of the node for req, or nil when it fits none of the job's partitions
-- (a share of a GPU, req.milli < 1000, only on nodes with shards: those without are
-- marked no_shards when any node of the cluster has them).
function D.route_pick(req, r, parts)
  req.key = int(req.gpus) .. ":" .. int(req.milli) .. ":" .. int(req.cpus) .. ":"
    .. (req.model or "")
  local best, b1, b2, b3
  for i, n in ipairs(r.nodes) do
    local v = in_partitions(n, parts) and not (n.no_shards and req.milli < 1000)
      and route_rise(n, req, r) or nil
    if v ~= nil then
      local k1, k2, k3
      if r.score then -- FGD's own rule: its integer score, ties in the table's rank order
        k1, k2, k3 = -math.floor(100 / (1 + math.exp(v / 1000))), 0, n.rank or i
      else
        k1 = math.floor(v / r.step + 1e-9)
        k2 = n.idle and 1 or 0
        k3 = n.total - req.gpus * req.milli
      end
      if best == nil or k1 < b1 or (k1 == b1 and (k2 < b2 or (k2 == b2 and k3 < b3))) then
        best, b1, b2, b3 = i, k1, k2, k3
      end
    end
  end
  return best
end

local function route_refresh(n)
  local total = 0
  for i = 1, #n.free do total = total + n.free[i] end
  n.total = total
  n.key = route_key(n)
end

-- Take req off node i of the copy (what Slurm will allocate there).
function D.route_take(i, req, r)
  local n = r.nodes[i]
  n.free = after(n.free, req)
  n.cpus = n.cpus - req.cpus
  if n.mem >= 0 then n.mem = n.mem - req.mem end
  n.idle = false
  route_refresh(n)
end

-- Check the route entry and add what the search needs; nil, message when it is unusable.
local function is_number(v) return type(v) == "number" and v == v end

-- Check the route entry and add what the search needs; nil, message when it is unusable.
-- The service writes it, but a wrong value must stop here, by name, never later inside a
-- submission (where an error would also lose the job's record and refusal check).
local function prepare_route(r)
  if type(r) ~= "table" then return nil, "route: not a table" end
  if not is_number(r.step) or r.step <= 0 then return nil, "route: step missing" end
  if type(r.mix) ~= "table" or type(r.nodes) ~= "table" then
    return nil, "route: mix or nodes missing"
  end
  r.shards_per_gpu = r.shards_per_gpu or 1000
  if not is_number(r.shards_per_gpu) or r.shards_per_gpu <= 0 then
    return nil, "route: shards_per_gpu must be a positive number"
  end
  r.wsum = 0
  for i, t in ipairs(r.mix) do
    if type(t) ~= "table" or not is_number(t.cpus) or not is_number(t.gpus)
      or not is_number(t.milli) or not is_number(t.weight) then
      return nil, "route: mix type " .. i .. ": cpus/gpus/milli/weight missing"
    end
    if t.models ~= nil then
      if type(t.models) ~= "table" then return nil, "route: mix type " .. i .. ": models" end
      t.model_set = {}
      for _, m in ipairs(t.models) do t.model_set[m] = true end
    end
    r.wsum = r.wsum + t.weight
  end
  if r.wsum <= 0 then return nil, "route: mix weights sum to 0" end
  for i, n in ipairs(r.nodes) do
    local bad = type(n) ~= "table" or type(n.feature) ~= "string" or type(n.free) ~= "table"
      or not is_number(n.cpus)
    if not bad then
      n.model = n.model or ""
      n.mem = n.mem or -1
      n.rank = n.rank or i
      bad = type(n.model) ~= "string" or not is_number(n.mem) or not is_number(n.rank)
      for g = 1, #n.free do
        if not is_number(n.free[g]) then bad = true end
      end
      if n.partitions ~= nil then
        if type(n.partitions) ~= "table" then
          bad = true
        else
          n.part_set = {}
          for _, p in ipairs(n.partitions) do
            if type(p) ~= "string" then bad = true else n.part_set[p] = true end
          end
        end
      end
    end
    if bad then
      return nil, "route: node " .. i
        .. ": feature/free/cpus/model/mem/rank/partitions missing or wrong"
    end
    n.idle = n.idle == true
    n.no_shards = n.no_shards == true -- no shard GRES: no shard job can run there
    route_refresh(n)
  end
  r.frag_cache, r.rise_cache, r.cached = {}, {}, 0
  return r
end
D.prepare_route = prepare_route

------------------------------------------------------------------------------------------
-- The node table (defrag_nodes.lua)
------------------------------------------------------------------------------------------

local function script_dir()
  if debug and debug.getinfo then
    local info = debug.getinfo(1, "S")
    local src = info and info.source or ""
    if string.sub(src, 1, 1) == "@" then
      local dir = string.match(string.sub(src, 2), "^(.*)/[^/]*$")
      if dir then return dir end
    end
  end
  return "/etc/slurm"
end

-- Check the generated table and precompute per node type the set of NVLink block sizes.
-- Returns the table, or nil and a message.
local function prepare_table(t)
  if type(t) ~= "table" then return nil, "does not return a table" end
  if t.version ~= 1 then return nil, "version " .. tostring(t.version) .. " (expected 1)" end
  for _, key in ipairs({ "slurm_user_uid", "service_uid" }) do
    if t[key] ~= nil and not is_number(t[key]) then return nil, key .. ": not a uid" end
  end
  if type(t.partitions) ~= "table" then return nil, "no partitions table" end
  for pname, part in pairs(t.partitions) do
    if type(part) ~= "table" or type(part.types) ~= "table" then
      return nil, "partition " .. tostring(pname) .. ": no types list"
    end
    part.name = part.name or pname
    part.max_gpus = 0
    for i, nt in ipairs(part.types) do
      if type(nt.gpus) ~= "number" or type(nt.nodes) ~= "number" then
        return nil, "partition " .. tostring(pname) .. " type " .. i .. ": gpus/nodes missing"
      end
      nt.models = nt.models or {}
      if nt.kept ~= nil and (type(nt.kept) ~= "boolean"
        or (nt.kept and (type(nt.hosts) ~= "string" or nt.hosts == "" or nt.nodes < 1))) then
        return nil, "partition " .. tostring(pname) .. " type " .. i
          .. ": kept must be true/false, and a kept type needs its hosts and nodes"
      end
      if nt.block_sizes ~= nil then -- nil = topology unknown: never refuse on its account
        nt.block_set = {}
        for _, k in ipairs(nt.block_sizes) do nt.block_set[k] = true end
      end
      if nt.gpus > part.max_gpus then part.max_gpus = nt.gpus end
    end
  end
  if t.short_first ~= nil then
    local sf = t.short_first
    if type(sf) ~= "table" or not is_number(sf.share) or sf.share <= 0 or sf.share > 1
      or not is_number(sf.span) or sf.span < 1 or sf.span > SANE_COUNT
      or (sf.large_gpus ~= nil and (not is_number(sf.large_gpus) or sf.large_gpus < 1))
      or (sf.all ~= nil and type(sf.all) ~= "boolean")
      or (sf.cap ~= nil and (not is_number(sf.cap) or sf.cap < 0 or sf.cap > NICE_LIMIT
        or sf.cap ~= math.floor(sf.cap)))
      or (sf.keep ~= nil and (type(sf.keep) ~= "table" or not is_number(sf.keep.demand)
        or sf.keep.demand < 0 or not is_number(sf.keep.window) or sf.keep.window < 1
        or sf.keep.window > SANE_COUNT)) then
      return nil, "short_first: expected { share = (0, 1], span = minutes (1-65535),"
        .. " all = true/false, large_gpus = a GPU count, cap = priority points (0-"
        .. string.format("%d", NICE_LIMIT) .. "),"
        .. " keep = { demand = 0 or more, window = minutes (1-65535) } }"
    end
    if sf.keep then -- the kept nodes, each once (a type may sit in several partitions)
      local n, seen = 0, {}
      for _, part in pairs(t.partitions) do
        for _, nt in ipairs(part.types) do
          if nt.kept and not seen[nt.hosts] then
            seen[nt.hosts] = true
            n = n + nt.nodes
          end
        end
      end
      sf.keep.nodes = n
    end
  end
  if type(t.pack) == "table" and type(t.pack.partitions) == "table" then
    -- the partitions with a node that has pack.feature: the hint names it nowhere else
    -- (a table without the list, rendered before it existed, gives no hint at all)
    t.pack.partition_set = {}
    for _, p in ipairs(t.pack.partitions) do t.pack.partition_set[p] = true end
  end
  if type(t.pack) == "table" and type(t.pack.fit_sizes) == "table" then
    t.pack.fit_set = {}
    for _, k in ipairs(t.pack.fit_sizes) do t.pack.fit_set[k] = true end
  end
  if t.route ~= nil then
    local r, err = prepare_route(t.route)
    if not r then return nil, err end
  end
  return t
end
D.prepare_table = prepare_table

function D.load_table(path)
  local ok, t = pcall(dofile, path)
  if not ok then return nil, tostring(t) end
  local done, prepared, err = pcall(prepare_table, t)
  if not done then return nil, path .. ": " .. tostring(prepared) end
  if not prepared then return nil, path .. ": " .. err end
  return prepared
end

-- Loaded once, when Slurm (re)loads this script. Without a table the hook still records
-- what jobs ask for, but refuses nothing and adds no hint.
D.table_path = DEFRAG_NODES_FILE or (script_dir() .. "/" .. TABLE_NAME)
do
  local t, err = D.load_table(D.table_path)
  if t then
    D.nodes = t
    log_info("loaded " .. D.table_path .. " (generated " .. tostring(t.generated_at) .. ")")
  else
    D.nodes = nil
    log_error("cannot load node table, recording only (no refusals, no hints): "
      .. tostring(err))
  end
end

------------------------------------------------------------------------------------------
-- The route file (per-job routing, written by the service every cycle)
------------------------------------------------------------------------------------------
--[[
The service rewrites the route file once per cycle (atomically: a new file renamed over
the old one). Its first line is a stamp that changes with every write; the script reads
that line at most once every ROUTE_CHECK_S seconds and the whole file only when the stamp
changed, so a new cycle's table replaces the copy the script kept (and the jobs it took
off it). A route whose `generated_at + valid_s` has passed is not used: the service
stopped writing (stopped, crashed, lost its lease), and a stale copy would steer jobs by
a cluster long gone. A missing file means no routing. The path: `route_file` in
defrag_nodes.lua (`plugins render --route-file`); a table without it never routes. The
file is read as data (below), never run.
]]
local route_file = { checked = nil, stamp = nil, route = nil, stale_logged = false,
  open_logged = false }
D.route_file_state = route_file

-- At most this much of the file is read as its first line (the stamp).
local STAMP_BYTES = 256

-- The file's first line; nil when there is no file (or it is empty). A file that exists
-- but cannot be read (SlurmUser lacks the right) is said once in the log, then counts as
-- no file.
local function first_line(path)
  local fh, msg, code = io.open(path, "rb")
  if not fh then
    if code ~= 2 and not route_file.open_logged then -- 2: ENOENT, no file, no routing
      route_file.open_logged = true
      log_error("route file unreadable, no per-job routing: " .. tostring(msg))
    end
    return nil
  end
  route_file.open_logged = false
  local head = fh:read(STAMP_BYTES)
  fh:close()
  if head == nil then return nil end
  local nl = string.find(head, "\n", 1, true)
  return nl and string.sub(head, 1, nl - 1) or head
end

-- The route file's path: only a table naming one routes (`plugins render --route-file`
-- writes it only where slurm.conf keeps --prefer soft, ignore_prefer_validation).
function D.route_file_path(tbl)
  if tbl and type(tbl.route_file) == "string" then return tbl.route_file end
  return nil
end

--[[
The file is data, never code: a size cap before anything is read, then one record per
line, read with anchored patterns that do not backtrack (src/slurm_defrag/actuator/
route_file.py writes it; slurm-plugins/README.md "The route file" documents it):

  -- slurm-defrag route <stamp>            first line, changes at every write
  -- ...                                   comments; empty lines are skipped
  route 2 <generated_at> <valid_s> <step> <shards_per_gpu> <score 0|1>
  mix <cpus> <gpus> <milli> <weight> <models>                 one per workload type
  node <feature> <model> <cpus> <mem> <idle 0|1> <rank> <no_shards 0|1> <free> <partitions>
  end <mix lines> <node lines>                                the last line

At most 32,768 lines of at most 64 KiB. Fields are separated by spaces, lists by commas
(none empty). <models> and <partitions>: "*" not given (any model; not filtered by
partition), "-" the empty list; <model> "-": none; <free> "-": no GPUs. Numbers are
plain decimals ([0-9.eE+-], finite); names are printable ASCII without spaces and
commas, features [A-Za-z0-9_]. The "2" is the format's version: a file of another
version (version 1 was a Lua table) is refused by name. Whoever can write the file can
steer hints, never run anything in slurmctld, nor make it read or work past the caps.
]]
local ROUTE_FORMAT = "2"
local MAX_ROUTE_BYTES = 4 * 1024 * 1024 -- a 4,000-node file is about 0.4 MB
local MAX_ROUTE_LINE = 65536 -- a node in 100 partitions of 64 characters is 7 KB
local MAX_ROUTE_LINES = 32768 -- a record per node: 32,000 nodes and their mix
D.MAX_ROUTE_BYTES = MAX_ROUTE_BYTES
local ROUTE_USAGE = {
  route = "route " .. ROUTE_FORMAT
    .. " <generated_at> <valid_s> <step> <shards_per_gpu> <score 0|1>",
  mix = "mix <cpus> <gpus> <milli> <weight> <models>",
  node = "node <feature> <model> <cpus> <mem> <idle 0|1> <rank> <no_shards 0|1> <free>"
    .. " <partitions>",
  ["end"] = "end <mix lines> <node lines>",
}
-- One anchored pattern per record, its fields captured. Each repeated class is followed
-- by a space (or the end) it cannot match, so a match costs one pass over the line.
local NUM = "([%d%.eE%+%-]+)" -- checked again by tonumber (finite, no hex, no "inf")
local ROUTE_RECORDS = {
  route = "^route (%d+) " .. NUM .. " " .. NUM .. " " .. NUM .. " " .. NUM .. " ([01])$",
  mix = "^mix " .. NUM .. " " .. NUM .. " " .. NUM .. " " .. NUM .. " ([!-~]+)$",
  node = "^node ([%w_]+) ([!-+%-.-~]+) " .. NUM .. " " .. NUM .. " ([01]) " .. NUM
    .. " ([01]) ([%d%.eE%+%-,]+) ([!-~]+)$", -- [!-+%-.-~]: printable, not space or comma
  ["end"] = "^end (%d+) (%d+)$",
}

-- A finite number (tonumber would also take hex and "inf"; the patterns let neither in).
local function finite(tok)
  if #tok > 32 then return nil end
  local n = tonumber(tok)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then return nil end
  return n
end

-- A name of a list, or of a record: at most 255 bytes, not one of the list markers.
local function route_name(tok)
  if #tok > 255 or tok == "-" or tok == "*" then return nil end
  return tok
end

-- A comma-separated list (a token of the record's pattern) of at most `limit` items,
-- each read by `item`; nil when an item is empty or not one.
local function route_list(tok, item, limit)
  if string.find(tok, ",,", 1, true) or string.byte(tok, 1) == 44
    or string.byte(tok, -1) == 44 then
    return nil
  end
  local out, n = {}, 0
  for piece in string.gmatch(tok, "[^,]+") do
    n = n + 1
    local v = n <= limit and item(piece)
    if not v then return nil end
    out[n] = v
  end
  return out
end

-- "*": nil (not given), "-": the empty list, else a list of names.
local function route_names(tok)
  if tok == "*" then return nil, true end
  if tok == "-" then return {}, true end
  local out = route_list(tok, route_name, 4096)
  return out, out ~= nil
end

-- One record of `kind` from `line` into r; false when the line is not one.
local function route_record(r, kind, line)
  if kind == "mix" then
    local cpus, gpus, milli, weight, models_tok = string.match(line, ROUTE_RECORDS.mix)
    if cpus == nil then return false end
    local models, ok = route_names(models_tok)
    local m = { cpus = finite(cpus), gpus = finite(gpus), milli = finite(milli),
      weight = finite(weight), models = models }
    if not (ok and m.cpus and m.gpus and m.milli and m.weight) then return false end
    r.mix[#r.mix + 1] = m
    return true
  end
  local feature, model, cpus, mem, idle, rank, no_shards, free, parts =
    string.match(line, ROUTE_RECORDS.node)
  if feature == nil or #feature > 255 then return false end
  local partitions, ok = route_names(parts)
  local n = { feature = feature, model = model == "-" and "" or route_name(model),
    cpus = finite(cpus), mem = finite(mem), idle = idle == "1", rank = finite(rank),
    no_shards = no_shards == "1",
    free = free == "-" and {} or route_list(free, finite, 1024), partitions = partitions }
  if not (ok and n.model and n.cpus and n.mem and n.rank and n.free) then return false end
  r.nodes[#r.nodes + 1] = n
  return true
end

-- The route table in `text`, or nil and a message naming the line.
local function parse_route(text)
  local r, ended, n = nil, false, 0
  if string.byte(text, -1) ~= 10 then text = text .. "\n" end
  for line in string.gmatch(text, "([^\n]*)\n") do
    n = n + 1
    if n > MAX_ROUTE_LINES then return nil, "more than " .. int(MAX_ROUTE_LINES) .. " lines" end
    if #line > MAX_ROUTE_LINE then
      return nil, "line " .. int(n) .. ": longer than " .. int(MAX_ROUTE_LINE) .. " bytes"
    end
    local first = string.byte(line, 1)
    if first ~= nil and not (first == 45 and string.byte(line, 2) == 45) then -- "--"
      if ended then return nil, "line " .. int(n) .. ": text after the end line" end
      local kind = (first == 110 and "node") or (first == 109 and "mix")
        or (first == 101 and "end") or (first == 114 and "route") or nil
      if kind and string.sub(line, 1, #kind + 1) ~= kind .. " " then kind = nil end
      if r == nil then
        local version, at, valid, step, spg, score = string.match(line, ROUTE_RECORDS.route)
        if kind ~= "route" or version ~= ROUTE_FORMAT then
          return nil, "line " .. int(n) .. ": not a route file of format " .. ROUTE_FORMAT
            .. " (expected '" .. ROUTE_USAGE.route .. "')"
        end
        r = { generated_at = finite(at), valid_s = finite(valid), step = finite(step),
          shards_per_gpu = finite(spg), score = score == "1", mix = {}, nodes = {} }
        if not (r.generated_at and r.valid_s and r.step and r.shards_per_gpu) then
          return nil, "line " .. int(n) .. ": expected '" .. ROUTE_USAGE.route .. "'"
        end
      elseif kind == "node" or kind == "mix" then
        if not route_record(r, kind, line) then
          return nil, "line " .. int(n) .. ": expected '" .. ROUTE_USAGE[kind] .. "'"
        end
      elseif kind == "end" then
        local mixes, nodes = string.match(line, ROUTE_RECORDS["end"])
        if mixes == nil then
          return nil, "line " .. int(n) .. ": expected '" .. ROUTE_USAGE["end"] .. "'"
        end
        if tonumber(mixes) ~= #r.mix or tonumber(nodes) ~= #r.nodes then
          return nil, "line " .. int(n)
            .. ": the end line counts other mix/node lines than the file has"
        end
        ended = true
      else
        return nil, "line " .. int(n) .. ": not a route record (mix, node or end)"
      end
    end
  end
  if r == nil then return nil, "empty" end
  if not ended then return nil, "no end line (cut short?)" end
  return r
end
D.parse_route = parse_route

-- The route file checked and prepared; nil and a message when it is unusable. Its size
-- is checked before it is read, and no more than the cap is ever read.
function D.load_route(path)
  local fh, msg = io.open(path, "rb")
  if not fh then return nil, path .. ": " .. tostring(msg) end
  local size = fh:seek("end")
  local text
  if size ~= nil and size <= MAX_ROUTE_BYTES and fh:seek("set") then
    text = fh:read(MAX_ROUTE_BYTES + 1) or ""
  end
  fh:close()
  if text == nil or #text > MAX_ROUTE_BYTES then
    return nil, path .. ": larger than " .. int(MAX_ROUTE_BYTES) .. " bytes"
  end
  local r, err = parse_route(text)
  if not r then return nil, path .. ": " .. err end
  local done, prepared, perr = pcall(prepare_route, r)
  if not done then return nil, path .. ": " .. tostring(prepared) end
  if not prepared then return nil, path .. ": " .. perr end
  return prepared
end

-- The route to use for a submission at `now` (seconds): the table's own entry, else the
-- route file's while it is fresh; nil: no routing.
function D.current_route(tbl, now)
  if tbl == nil then return nil end
  if tbl.route ~= nil then return tbl.route end
  local path = D.route_file_path(tbl)
  if path == nil then return nil end
  local rf = route_file
  if rf.checked == nil or now - rf.checked >= ROUTE_CHECK_S or now < rf.checked then
    rf.checked = now
    local stamp = first_line(path)
    if stamp ~= rf.stamp then
      rf.stamp, rf.route, rf.stale_logged = stamp, nil, false
      if stamp ~= nil then
        local r, err = D.load_route(path)
        if r then
          rf.route = r
        else
          log_error("route file refused, no per-job routing until the next one: "
            .. tostring(err))
        end
      end
    end
  end
  local r = rf.route
  -- too old (the service stopped), or dated ahead of this clock by more than its life
  if r and (now > r.generated_at + r.valid_s or r.generated_at > now + r.valid_s) then
    if not rf.stale_logged then
      rf.stale_logged = true
      log_info("route file not within " .. tostring(r.valid_s) .. " s of now: no per-job"
        .. " routing until the service writes a new one")
    end
    return nil
  end
  return r
end

------------------------------------------------------------------------------------------
-- From a job description to a normalised GPU request
------------------------------------------------------------------------------------------

-- The partitions the job may run in: its -p list, or the default partition.
local function job_partitions(partition, tbl)
  local out = {}
  local spec = partition
  if (spec == nil or spec == "") and tbl then spec = tbl.default_partition end
  if type(spec) == "string" then
    for p in string.gmatch(spec, "[^,%s]+") do table.insert(out, p) end
  end
  return out
end
D.job_partitions = job_partitions

-- Does every one of the job's partitions have a node with the feature (`set`: the
-- partitions that do, from the table)? A --prefer naming a feature no node of the
-- partition has leaves a pending job with the reason BadConstraints, which reads as an
-- error to its user; so a hint names a feature only where it exists.
function D.feature_in_all(set, parts)
  if set == nil or #parts == 0 then return false end
  for _, p in ipairs(parts) do
    if not set[p] then return false end
  end
  return true
end

-- The largest GPU count any known node of these partitions has (nil if none is known).
local function largest_node(parts, tbl)
  local best
  for _, p in ipairs(parts) do
    local part = tbl and tbl.partitions[p]
    if part and part.max_gpus > 0 and (best == nil or part.max_gpus > best) then
      best = part.max_gpus
    end
  end
  return best
end

--[[
`f` maps a field name to its value (job_desc on submit; job_desc merged over job_rec on
modify). Returns nil when the job asks for no GPUs, or a request:
  { gpn = GPUs per node, nodes = node count, model = type or nil, total = GPUs in all,
    source = which option it came from }
or nil, err when a GPU option is malformed.
]]
function D.gpu_request(f, tbl)
  local min_nodes, max_nodes = given(f("min_nodes")), given(f("max_nodes"))
  local nodes = min_nodes or 1
  local fixed = min_nodes ~= nil and max_nodes ~= nil and min_nodes == max_nodes

  -- --gres / --gpus-per-node: already per node.
  local count, model, err = parse_gpu_tres(f("tres_per_node"))
  if err then return nil, err end
  if count ~= nil then
    return { gpn = count, nodes = nodes, model = model, total = count * nodes,
             source = "per_node" }
  end

  -- --gpus-per-socket: per socket, times --sockets-per-node (Slurm requires it).
  count, model, err = parse_gpu_tres(f("tres_per_socket"))
  if err then return nil, err end
  if count ~= nil then
    local gpn = count * (given(f("sockets_per_node")) or 1)
    return { gpn = gpn, nodes = nodes, model = model, total = gpn * nodes,
             source = "per_socket" }
  end

  -- --gpus / --gpus-per-task: a total that Slurm may spread over nodes.
  local total, source
  count, model, err = parse_gpu_tres(f("tres_per_job"))
  if err then return nil, err end
  if count ~= nil then
    total, source = count, "per_job"
  else
    count, model, err = parse_gpu_tres(f("tres_per_task"))
    if err then return nil, err end
    if count == nil then return nil end
    source = "per_task"
    local tpn = given(f("ntasks_per_node"))
    if tpn then -- tasks per node fixed: so is the GPU count per node
      local gpn = count * tpn
      local n = min_nodes or math.max(1, ceil_div(given(f("num_tasks")) or tpn, tpn))
      return { gpn = gpn, nodes = n, model = model, total = gpn * n, source = source }
    end
    total = count * (given(f("num_tasks")) or 1)
  end

  if total <= 0 then
    return { gpn = 0, nodes = nodes, model = model, total = 0, source = source }
  end
  if not fixed then
    -- Slurm may use any node count in range. Record the most compact shape: the one the
    -- job needs if it wants its GPUs NVLink-connected (all on one node when they fit).
    local biggest = largest_node(job_partitions(f("partition"), tbl), tbl) or total
    nodes = math.max(nodes, ceil_div(total, math.max(biggest, 1)))
    if max_nodes and nodes > max_nodes then nodes = max_nodes end
  end
  return { gpn = ceil_div(total, nodes), nodes = nodes, model = model, total = total,
           source = source }
end

------------------------------------------------------------------------------------------
-- Can any node ever satisfy it?
------------------------------------------------------------------------------------------

--[[
Check one partition. Returns true, or false and a one-line reason naming the limit.
A node type whose topology is unknown (no Links= and no template) never causes a refusal.
]]
local function check_partition(part, req, anygpu)
  local need_block = (not anygpu) and req.gpn > 1
  local best_gpus, fit_nodes, block_nodes = 0, 0, 0
  local sizes_seen, max_block = {}, 0
  for _, nt in ipairs(part.types) do
    local have
    if req.model then have = nt.models[req.model] or 0 else have = nt.gpus end
    if have > best_gpus then best_gpus = have end
    if have >= req.gpn then
      fit_nodes = fit_nodes + nt.nodes
      if not need_block or nt.block_set == nil or nt.block_set[req.gpn] then
        block_nodes = block_nodes + nt.nodes
      else
        for k in pairs(nt.block_set) do sizes_seen[k] = true end
        if (nt.max_block or 0) > max_block then max_block = nt.max_block end
      end
    end
  end
  local what = req.model and (req.model .. " ") or ""
  if fit_nodes == 0 then
    if req.model and best_gpus == 0 then
      return false, string.format("partition %s has no %sGPUs", part.name, what)
    end
    return false, string.format(
      "%s %sGPUs per node requested, but the largest %snode in partition %s has %s",
      int(req.gpn), what, what, part.name, int(best_gpus))
  end
  if block_nodes == 0 then
    local limit
    if req.gpn > max_block then
      limit = "at most " .. int(max_block)
    else
      local list = {}
      for k in pairs(sizes_seen) do table.insert(list, k) end
      table.sort(list)
      limit = "only " .. format_sizes(list)
    end
    return false, string.format(
      "%s NVLink-connected %sGPUs per node requested, but nodes in partition %s offer "
      .. "NVLink blocks of %s GPUs; add --comment=defrag:anygpu if any %s GPUs will do",
      int(req.gpn), what, part.name, limit, int(req.gpn))
  end
  if block_nodes < req.nodes then
    local kind = need_block and "NVLink-connected " or ""
    return false, string.format(
      "%s nodes with %s %s%sGPUs each requested, but partition %s has only %s such node%s",
      int(req.nodes), int(req.gpn), kind, what, part.name, int(block_nodes),
      block_nodes == 1 and "" or "s")
  end
  return true
end

-- Returns true, or false and the reason from the first partition (all must fail).
function D.check_feasible(req, parts, tbl, anygpu)
  if not tbl then return true end
  local first_reason
  for _, p in ipairs(parts) do
    local part = tbl.partitions[p]
    if part == nil then return true end -- not in the table: we know nothing, refuse nothing
    local ok, reason = check_partition(part, req, anygpu)
    if ok then return true end
    first_reason = first_reason or reason
  end
  if first_reason == nil then return true end
  return false, first_reason
end

------------------------------------------------------------------------------------------
-- Admin comment
------------------------------------------------------------------------------------------

-- Keep everything that is not ours, in order; drop our old keys; append the new ones.
function D.merge_admin_comment(old, tokens)
  local kept = {}
  if type(old) == "string" then
    for tok in string.gmatch(old, "%S+") do
      if string.sub(tok, 1, 7) ~= "defrag:" then table.insert(kept, tok) end
    end
  end
  for _, tok in ipairs(tokens) do table.insert(kept, tok) end
  return table.concat(kept, " ")
end

local function old_has_protect(old)
  return has_token(old, "defrag:protect")
end

------------------------------------------------------------------------------------------
-- The decision, shared by submit and modify
------------------------------------------------------------------------------------------

--[[
Decide what to do with a job. `f(name)` reads a field. Returns a plan:
  { reject = message }  or
  { admin_comment = new text or nil (leave as is), prefer = feature or nil, log = text }
Nothing is written here, so an error half-way leaves the job untouched.
]]
-- A job that says itself where it runs (--prefer, --constraint, -w, -x, --reservation)
-- gets no hint. Slurm schedules a job with --prefer by trying its preferred features in
-- place of its --constraint first (a hint could override a user's constraint), and on a
-- node the job excludes or outside its reservation the named node is no use (and the
-- route's copy would count the job where it will not run).
local PLACEMENT_FIELDS = { "prefer", "features", "req_nodes", "exc_nodes", "reservation" }
local function own_placement(f)
  for _, name in ipairs(PLACEMENT_FIELDS) do
    local v = f(name)
    if v ~= nil and v ~= "" then return true end
  end
  return false
end
D.own_placement = own_placement

------------------------------------------------------------------------------------------
-- Queue order: short first, large and scarce first (tbl.short_first)
------------------------------------------------------------------------------------------

--[[
A priority boost, set at submit as a negative --nice (added to the user's own):

  raw   = tier x span + (span - time limit in minutes, 0 when none is given or longer)
  boost = floor(raw x cap / (3 x span))     with short_first.cap; raw without one

cap (priority points) is what `plugins render` read as the site's priority range (the sum
of its PriorityWeight*) times the admin's share (--boost-cap, default 10 %): the boost
keeps its order (tier, then shortest limit) and never outweighs more than that share of
fair-share, QOS and the rest (src/slurm_defrag/packing/queue_order.py). cap = 0
(priority/basic, or no weights): no job's priority changes. A table without a cap (the
simulator without a priority model) gives the raw boost.

tier 2: a one-node GPU job only a few nodes can hold (its GPU count and type, CPUs and
memory fit at most short_first.share of its partitions' GPU nodes); tier 1: a job asking
for at least short_first.large_gpus GPUs per node; tier 0: any other job, boosted only
with short_first.all. Slurm starts jobs in priority order, so within a tier the short
limits go first, and a higher tier goes before a lower one. Without `all` only tiers 1
and 2 change; other jobs keep their place behind them. The order is what Slurm's
priority gives; backfill still starts whatever fits without delaying those ahead.

Why a boost and not a nice for the long jobs: priority/multifactor never goes below 1
(recorded on 22.05: every job of a cluster without priority weights sits there, and a
nice changes nothing), and a positive nice ranks the jobs below everyone else (measured
worse in the simulator). Slurm checks a user's own negative nice before job_submit runs,
so the script may set one for any user. A node type the table gives no cpus/mem for fits
any CPUs and memory (unknown: never made scarce on their account).
]]
-- Does a one-node request (gpn GPUs of req.model, cpus, mem MB) fit a node of type nt?
local function fits(nt, req, cpus, mem)
  local have = nt.gpus
  if req.model then have = nt.models[req.model] or 0 end
  return have >= req.gpn and (not is_number(nt.cpus) or nt.cpus >= cpus)
    and (not is_number(nt.mem) or nt.mem >= mem)
end

local function scarce(f, req, parts, tbl, share)
  local cpus = job_cpus(f)
  local mem = mem_mb(f("pn_min_memory")) or 0
  local fit, gpu_nodes = 0, 0
  for _, p in ipairs(parts) do
    local part = tbl.partitions[p]
    for _, nt in ipairs(part and part.types or {}) do
      if nt.gpus > 0 then
        gpu_nodes = gpu_nodes + nt.nodes
        if fits(nt, req, cpus, mem) then fit = fit + nt.nodes end
      end
    end
  end
  return fit > 0 and fit <= share * gpu_nodes
end

-- The largest raw boost, in spans: tier 2 plus a whole span (a limit of 0).
local BOOST_SPANS = 3
D.BOOST_SPANS = BOOST_SPANS

-- The extra nice for a job (negative), or nil. `req` may be nil (no GPU asked for).
function D.short_first_nice(f, req, parts, tbl)
  local sf = tbl and tbl.short_first
  if not sf then return nil end
  local gpn = req and req.gpn or 0
  local tier = 0
  if gpn > 0 and req.nodes == 1 and scarce(f, req, parts, tbl, sf.share) then
    tier = 2
  elseif sf.large_gpus and gpn >= sf.large_gpus then
    tier = 1
  end
  if tier == 0 and not sf.all then return nil end
  local limit = given(f("time_limit"))
  local boost = tier * sf.span + (limit and math.max(0, sf.span - limit) or 0)
  if sf.cap then boost = math.floor(boost * sf.cap / (BOOST_SPANS * sf.span)) end
  if boost <= 0 then return nil end
  return -boost
end

--[[
Keep the scarce nodes for the jobs only they can hold (short_first.keep = { demand = D,
window = W minutes }): a one-node job that is not one of those (tier 2) and fits a node
outside the kept types of its partitions gets the kept types' hosts added to its
--exclude, while the scarce jobs submitted in the last W minutes ask for at least D of
the kept nodes' time (each its time limit, at most W; none given: W). D = 0: always.
The render marks a type kept (`kept = true`) when a job asking for all of its GPUs, CPUs
and memory would be scarce, and other nodes have as many GPUs (a big-CPU or big-memory
variant of a common node, whatever its GPU model; a type rare only by its model is
never kept).

Why hard and not a Weight: the scarce queue is served by few nodes, and a node another
job took while none of the scarce jobs waited is one they queue behind when they come.
Why only under demand: without it the kept nodes stand idle (measured: docs/
benchmarks.md, "Keeping the scarce nodes"). The window lives in this script's Lua state,
which slurmctld keeps between submissions; a reload or restart empties it, and the
nodes are shared again until the scarce jobs come back (the safe side). A job that says
where it wants to run (-w, -x, --constraint, --prefer, --reservation: a feature may be
one only kept nodes have, its own --exclude may cover every other node), or fits no
other node, is left alone; a scarce job counts towards the demand either way. A job the
keeping excludes gets no per-job route (the route might name a kept node).
]]
local KEEP_MEMORY = 100000 -- scarce submissions remembered at most (a flood ages out)
local keep_window = { first = 1, last = 0, sum = 0 }
D.clock = os.time

local function forget_oldest(w)
  w.sum = w.sum - w[w.first].s
  w[w.first] = nil
  w.first = w.first + 1
end

local function keep_demand(now, keep)
  local w = keep_window
  local span = keep.window * 60
  while w.first <= w.last and (w[w.first].t <= now - span or w[w.first].t > now) do
    forget_oldest(w)
  end
  return w.sum / (keep.nodes * span)
end

local function keep_remember(now, keep, limit_min)
  local w = keep_window
  local span = keep.window * 60
  local s = math.min(span, limit_min and limit_min * 60 or span)
  if w.last - w.first + 1 >= KEEP_MEMORY then forget_oldest(w) end
  w.last = w.last + 1
  w[w.last] = { t = now, s = s }
  w.sum = w.sum + s
end

-- Forget the window (tests; slurmctld does it by reloading the script).
function D.keep_reset() keep_window = { first = 1, last = 0, sum = 0 } end

-- The demand the window holds at `now` (nil: no keeping in the table), for the
-- simulator's diagnosis (bench/sim_keep_demand.py) to read what the script decides on.
function D.keep_level(tbl, now)
  local keep = tbl and tbl.short_first and tbl.short_first.keep
  if not keep or keep.nodes == 0 then return nil end
  return keep_demand(now, keep)
end

function D.keep_scarce(f, req, shards, parts, tbl)
  local sf = tbl and tbl.short_first
  local keep = sf and sf.keep
  if not keep or (given(f("min_nodes")) or 1) ~= 1 or (req ~= nil and req.nodes ~= 1) then
    return nil
  end
  -- where it fits: shards need one GPU; the scarce test is short_first_nice's (GPU jobs)
  local rq = { gpn = req and req.gpn or (shards and 1 or 0), model = req and req.model }
  local cpus, mem = job_cpus(f), mem_mb(f("pn_min_memory")) or 0
  local elsewhere, on_kept, kept, seen = false, false, {}, {}
  for _, p in ipairs(parts) do
    local part = tbl.partitions[p]
    for _, nt in ipairs(part and part.types or {}) do
      if nt.kept then
        on_kept = on_kept or fits(nt, rq, cpus, mem)
        if not seen[nt.hosts] then
          seen[nt.hosts] = true
          table.insert(kept, nt.hosts)
        end
      elseif fits(nt, rq, cpus, mem) then
        elsewhere = true
      end
    end
  end
  local now = D.clock()
  if req ~= nil and req.gpn > 0 and scarce(f, req, parts, tbl, sf.share) then
    -- counted even when it names its nodes or features: it still wants the kept ones
    if on_kept then keep_remember(now, keep, given(f("time_limit"))) end
    return nil
  end
  -- own placement, its own --exclude included: with ours added it might fit nowhere
  if own_placement(f) or not elsewhere or #kept == 0 then return nil end
  if keep_demand(now, keep) < keep.demand then return nil end
  return table.concat(kept, ",")
end

-- The raw job_desc.nice for our extra nice: Slurm stores nice + NICE_OFFSET (NO_VAL when
-- the user gave none; job_submit_lua.c) and accepts a nice within +-2147483645.
local NICE_OFFSET = slurm.NICE_OFFSET or 2147483648
function D.raw_nice(old, extra)
  local base = NICE_OFFSET
  if is_number(old) and old ~= slurm.NO_VAL and old >= 0 and old < 2 * NICE_OFFSET then
    base = old
  end
  local raw = base + extra
  return math.max(NICE_OFFSET - 2147483645, math.min(raw, NICE_OFFSET + 2147483645))
end

-- A job that says it cannot start now: --begin in the future, or waiting on a dependency
-- (job_desc fields recorded on 22.05 and 24.11: begin_time an epoch, dependency
-- "afterok:68"; unset: 0, nil). It still gets the route's hint (the best guess there is;
-- the script is not called again when it becomes eligible) but is not taken off the
-- copy: it would make its node look full until the next table. A held job (-H: priority
-- 0) is counted: when it is released is not known, and holding then releasing at once
-- is how workflows submit (and how tests/e2e/live_hooks/test_live_route.py reads the hint).
local function starts_later(f, now)
  local begin = f("begin_time")
  local dep = f("dependency")
  return (is_number(begin) and begin > now) or (type(dep) == "string" and dep ~= "")
end
D.starts_later = starts_later

function D.plan(f, opts)
  opts = opts or {}
  local tbl = D.nodes
  local comment = f("comment")
  local anygpu = has_token(comment, "defrag:anygpu")
  local old_admin = f("admin_comment")
  local allow_protect = not (tbl and tbl.allow_protect == false)
  local protect = (allow_protect and has_token(comment, "defrag:protect"))
    or (opts.keep_protect and old_has_protect(old_admin))

  local plan = {}
  if has_token(comment, "defrag:protect") and not allow_protect then
    plan.user_note = "defrag: defrag:protect is not allowed on this cluster and was ignored"
  end

  local enforce = tbl ~= nil and tbl.enforce ~= false
  local req, err = D.gpu_request(f, tbl)
  if req == nil and err ~= nil then
    -- Slurm does not reliably reject these itself: 24.11 accepts a held job with
    -- --gres=gpu:abc:xyz:1 that can never run. A request we cannot read cannot be
    -- recorded either, so with enforcement on it is refused; without, left to Slurm.
    if enforce then
      return { reject = "defrag: cannot read the GPU request: " .. err
        .. " (expected gpu[:type][:count])" }
    end
    plan.log = "cannot read the GPU request (" .. err .. "); left to Slurm, nothing recorded"
  end

  if req ~= nil and (req.gpn > SANE_COUNT or req.nodes > SANE_COUNT) then
    -- no node has that many; a count like this would not even print as an integer
    if enforce then
      return { reject = string.format("defrag: %s GPUs per node is not a possible request",
        int(req.gpn)) }
    end
    plan.log = "absurd GPU count " .. tostring(req.gpn) .. "; left to Slurm, nothing recorded"
    req = nil
  end

  local tokens = {}
  if req ~= nil and req.gpn > 0 then
    local parts = job_partitions(f("partition"), tbl)
    if enforce then
      local ok, reason = D.check_feasible(req, parts, tbl, anygpu)
      if not ok then return { reject = "defrag: " .. reason } end
    end
    table.insert(tokens, "defrag:nvlink=" .. (anygpu and "0" or int(req.gpn)))
    table.insert(tokens, "defrag:gpn=" .. int(req.gpn))
    table.insert(tokens, "defrag:nodes=" .. int(req.nodes))

    -- Packing hint: a small one-node job should fill a partly used node, not open an
    -- empty one (which an 8-GPU NVLink job may need later). --prefer is soft: Slurm
    -- falls back to any node when no preferred node has room. With fit classes
    -- (pack.fit_prefix) a k-GPU job prefers the nodes the service tagged as the best fit
    -- for k GPUs this cycle (defrag_fit<k>); otherwise the one partial-node feature.
    local pack = tbl and tbl.pack
    if pack and opts.submit and req.nodes == 1
      and f("shared") ~= JOB_SHARED_NONE
      and not own_placement(f) then
      if pack.fit_prefix and pack.fit_set and pack.fit_set[req.gpn] then
        plan.prefer = pack.fit_prefix .. int(req.gpn)
      elseif pack.feature and req.gpn <= (pack.max_gpus or 0)
        and D.feature_in_all(pack.partition_set, job_partitions(f("partition"), tbl)) then
        plan.prefer = pack.feature
      end
    end
    plan.log = string.format("%s (from %s%s)", table.concat(tokens, " "), req.source,
      req.model and (", type " .. req.model) or "")
  end
  -- A job asking for shards only (no gpu GRES): the shard fit class, same rules.
  -- With shard_sizes (ascending), S shards prefer <shard_feature><T>, T the smallest size
  -- >= S (none above the largest); without, the one shard feature.
  local pack = tbl and tbl.pack
  local shards = req == nil and err == nil and asks_shards(f("tres_per_node"))
  if shards and pack and pack.shard_feature and opts.submit
    and (given(f("min_nodes")) or 1) == 1
    and f("shared") ~= JOB_SHARED_NONE
    and not own_placement(f) then
    if type(pack.shard_sizes) == "table" then
      local s = shards
      for _, size in ipairs(pack.shard_sizes) do
        if type(s) == "number" and size >= s then
          plan.prefer = pack.shard_feature .. int(size)
          break
        end
      end
    else
      plan.prefer = pack.shard_feature
    end
  end
  -- CPU-aware classes (pack.cpu_buckets, ascending): a GPU or shard class gets the
  -- suffix c<B>, B the smallest bucket >= the job's CPUs, so that its preferred nodes
  -- have those CPUs free (a class's tightest nodes often have few); above the largest
  -- bucket, no hint.
  if plan.prefer and pack and type(pack.cpu_buckets) == "table" then
    local cpus = job_cpus(f)
    local bucket = nil
    for _, b in ipairs(pack.cpu_buckets) do
      if type(b) == "number" and b >= cpus then bucket = b break end
    end
    plan.prefer = bucket and (plan.prefer .. "c" .. int(bucket)) or nil
  end
  -- A one-node job asking for no GPU at all (CPUs only) prefers pack.cpu_feature: the
  -- nodes where its CPUs strand the fewest free GPUs (a GPU node's CPUs taken by CPU-only
  -- work leave its GPUs unusable; measured in docs/benchmarks.md, Protocol A).
  if pack and pack.cpu_feature and opts.submit and err == nil
    and (req == nil or req.gpn == 0) and not shards
    and (given(f("min_nodes")) or 1) == 1
    and f("shared") ~= JOB_SHARED_NONE
    and not own_placement(f) then
    plan.prefer = pack.cpu_feature
  end
  -- Keeping the scarce nodes (before routing: a route could name a kept node).
  if opts.submit and err == nil then
    plan.exclude = D.keep_scarce(f, req, shards, job_partitions(f("partition"), tbl), tbl)
  end
  -- Per-job routing: one node for a one-node job (GPUs, shards or CPUs only).
  local route = opts.submit and D.current_route(tbl, os.time())
  if route and opts.submit and err == nil and f("shared") ~= JOB_SHARED_NONE
    and plan.exclude == nil
    and (given(f("min_nodes")) or 1) == 1
    and not own_placement(f)
    and (req == nil or (req.nodes == 1 and req.model ~= false))
    and shards ~= true then -- a shard count it cannot read: no hint
    local cpus = job_cpus(f)
    local mem = mem_mb(f("pn_min_memory")) or 0
    local rq = { gpus = 0, milli = 0, cpus = cpus, mem = mem, model = req and req.model }
    if req ~= nil and req.gpn > 0 then
      rq.gpus, rq.milli = req.gpn, 1000
    elseif shards and type(shards) == "number" then
      rq.gpus, rq.milli = 1, math.ceil(shards * 1000 / route.shards_per_gpu)
    end
    local i = D.route_pick(rq, route, job_partitions(f("partition"), tbl))
    if i then
      plan.prefer = route.nodes[i].feature
      plan.route = { i = i, req = rq, table = route, later = starts_later(f, os.time()) }
    end
  end
  if opts.submit and err == nil then
    plan.nice = D.short_first_nice(f, req, job_partitions(f("partition"), tbl), tbl)
  end
  if protect then table.insert(tokens, "defrag:protect") end

  if #tokens > 0 then
    plan.admin_comment = D.merge_admin_comment(old_admin, tokens)
  elseif old_admin and string.find(old_admin, "defrag:", 1, true) then
    -- the job no longer asks for GPUs (modify): drop our stale keys
    plan.admin_comment = D.merge_admin_comment(old_admin, {})
  end
  return plan
end

------------------------------------------------------------------------------------------
-- Slurm entry points
------------------------------------------------------------------------------------------

local function job_label(job_desc, job_rec)
  local id = job_rec and job_rec.job_id
  if id then return "JobId=" .. tostring(id) end
  return "job '" .. shown(job_desc.name) .. "' of uid " .. tostring(job_desc.user_id)
end

--[[
Nobody else uses a defrag reservation. The service's reservations (defrag-<plan id>,
src/slurm_defrag/domain/plan.py) hold nodes for one pending job, the plan's target; Slurm
needs them to list a user, the target's, for the plan's TTL + 300 s, so that user could
run other jobs in them. Only the service puts a job into one
(`scontrol update JobId=<target> ReservationName=defrag-<id>`), so a submission or an
update that names a defrag-* reservation is refused unless made by root, SlurmUser or the
service's own account (`service_uid` in the table: `plugins render --service-user`).
Every name of a comma-separated list (23.02+ takes several) is checked, without case.
Leaving a reservation (ReservationName= empty) passes.
]]
local RESERVATION_PREFIX = "defrag-"
local ESLURM_RESERVATION_ACCESS = slurm.ESLURM_RESERVATION_ACCESS or 2052
local ESLURM_RESERVATION_INVALID = slurm.ESLURM_RESERVATION_INVALID or 2053

-- root, SlurmUser and the service's account: the uids that may use defrag-* reservations
local function privileged(uid)
  if uid == 0 then return true end
  local tbl = D.nodes
  return tbl ~= nil and uid ~= nil and (uid == tbl.slurm_user_uid or uid == tbl.service_uid)
end
D.privileged = privileged

-- The first defrag-* reservation a --reservation value names (nil: none).
local function defrag_reservation(value)
  if type(value) ~= "string" then return nil end
  for item in string.gmatch(value, "[^,]+") do
    local name = trim(item)
    if string.lower(string.sub(name, 1, #RESERVATION_PREFIX)) == RESERVATION_PREFIX then
      return name
    end
  end
  return nil
end
D.defrag_reservation = defrag_reservation

-- The refusal for a --reservation value from uid (nil: it may pass).
local function reservation_refusal(value, uid)
  if type(value) ~= "string" or value == "" or privileged(uid) then return nil end
  if #value > FIELD_CAPS.reservation then
    return { rc = ESLURM_RESERVATION_INVALID, reject = "defrag: --reservation longer than "
      .. int(FIELD_CAPS.reservation) .. " characters" }
  end
  local name = defrag_reservation(value)
  if name == nil then return nil end
  return { rc = ESLURM_RESERVATION_ACCESS, reject = "defrag: reservation " .. shown(name)
    .. " holds nodes for the one job slurm-defrag is starting there; no other job may use it" }
end

-- 22.05 refuses slurm.log_user() in slurm_job_modify (it logs an error instead); 24.11
-- passes it on to scontrol. 22.05 is also the release that exports only 8 ESLURM_* codes
-- to Lua, so the presence of ESLURM_INVALID_GRES tells the two apart.
local USER_MSG_ON_MODIFY = slurm.ESLURM_INVALID_GRES ~= nil

local function apply(plan, job_desc, label, is_modify)
  if plan.reject then
    log_info(label .. " refused: " .. plan.reject)
    if not is_modify or USER_MSG_ON_MODIFY then log_user(plan.reject) end
    return plan.rc or ESLURM_INVALID_GRES
  end
  if plan.user_note then log_user(plan.user_note) end
  if plan.admin_comment ~= nil then job_desc.admin_comment = plan.admin_comment end
  if plan.prefer ~= nil then job_desc.prefer = plan.prefer end
  if plan.nice ~= nil then job_desc.nice = D.raw_nice(job_desc.nice, plan.nice) end
  if plan.exclude ~= nil then job_desc.exc_nodes = plan.exclude end
  if plan.route and not plan.route.later then
    D.route_take(plan.route.i, plan.route.req, plan.route.table)
  end
  if plan.log or plan.nice or plan.exclude then
    log_debug(label .. ": " .. (plan.log or "")
      .. (plan.prefer and (" prefer=" .. plan.prefer) or "")
      .. (plan.nice and (" nice" .. int(plan.nice)) or "")
      .. (plan.exclude and (" exclude=" .. plan.exclude) or ""))
  end
  return slurm.SUCCESS
end

-- True (and logged) when a field is over its cap: the job is then left as it is.
local function left_alone(f, label)
  local name, cap = over_cap(f)
  if name == nil then return false end
  log_info(label .. ": " .. name .. " longer than " .. int(cap)
    .. " characters; job left as it is (nothing recorded, no hint)")
  return true
end

local function submit(job_desc, submit_uid)
  local label = job_label(job_desc)
  local refused = reservation_refusal(job_desc.reservation, submit_uid)
  if refused then return apply(refused, job_desc, label) end
  local function f(name) return job_desc[name] end
  if left_alone(f, label) then return slurm.SUCCESS end
  return apply(D.plan(f, { submit = true }), job_desc, label)
end

-- Fields whose change can change the record; any other update is left alone.
local MODIFY_FIELDS = { "tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket",
  "min_nodes", "max_nodes", "num_tasks", "partition", "comment" }

local function modify(job_desc, job_rec, modify_uid)
  local label = job_label(job_desc, job_rec)
  local refused = reservation_refusal(job_desc.reservation, modify_uid)
  if refused then return apply(refused, job_desc, label, true) end
  -- An admin setting AdminComment explicitly wins: do not rewrite it under them.
  if job_desc.admin_comment ~= nil then return slurm.SUCCESS end
  local touched = false
  for _, name in ipairs(MODIFY_FIELDS) do
    local v = job_desc[name]
    if v ~= nil and (type(v) ~= "number" or given(v)) then touched = true break end
  end
  if not touched then return slurm.SUCCESS end
  local function f(name)
    local v = job_desc[name]
    if v == nil or (type(v) == "number" and not given(v)) then v = job_rec[name] end
    return v
  end
  if left_alone(f, label) then return slurm.SUCCESS end
  -- The user's comment decides the opt-out; while it is not changed, keep a recorded one.
  local plan = D.plan(f, { keep_protect = job_desc.comment == nil })
  -- Slurm lets only root and SlurmUser change an AdminComment, and checks that after this
  -- hook: writing it into a user's update would turn "scontrol update job=N Comment=..."
  -- into "Access/permission denied". So a user's update is still checked (and may be
  -- refused) but the record is only rewritten for root and SlurmUser (not the service's
  -- Operator account: Slurm refuses it too).
  local tbl = D.nodes
  if modify_uid ~= 0 and not (tbl and tbl.slurm_user_uid == modify_uid) and not plan.reject then
    if plan.admin_comment ~= nil and plan.admin_comment ~= f("admin_comment") then
      log_debug(label .. ": update by uid " .. tostring(modify_uid)
        .. " changes the GPU request or opt-out; record left as is (only root/SlurmUser may"
        .. " change AdminComment)")
    end
    plan.admin_comment = nil
  end
  return apply(plan, job_desc, label, true)
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local ok, rc = pcall(submit, job_desc, submit_uid)
  if ok then return rc end
  log_error("internal error, job accepted unchanged: " .. tostring(rc))
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  local ok, rc = pcall(modify, job_desc, job_rec, modify_uid)
  if ok then return rc end
  log_error("internal error in modify, update accepted unchanged: " .. tostring(rc))
  return slurm.SUCCESS
end
