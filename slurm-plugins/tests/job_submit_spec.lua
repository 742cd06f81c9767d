-- Unit tests of job_submit.lua outside Slurm: run `busted` in slurm-plugins/.
local H = require("tests.helper")

local ESLURM_INVALID_GRES = 2072

describe("parse_gpu_tres", function()
  local parse
  setup(function()
    H.load()
    parse = slurm_defrag.parse_gpu_tres
  end)

  local cases = {
    -- spec                                   count  model
    { "gres:gpu:4",                            4,    nil },     -- 22.05 --gres / --gpus-per-node
    { "gres:gpu:a100:2",                       2,    "a100" },
    { "gres/gpu:4",                            4,    nil },     -- 24.11
    { "gres/gpu:a100-80g:3",                   3,    "a100-80g" },
    { "gres/gpu=1",                            1,    nil },     -- 24.11 --gpus-per-task
    { "gpu:2",                                 2,    nil },
    { "gpu",                                   1,    nil },
    { "gpu:h100",                              1,    "h100" },
    { "gres:gpu:0",                            0,    nil },
    { "gres:gpu:1k",                           1024, nil },
    { "gres:nic:1,gres:gpu:2",                 2,    nil },
    { "gres:gpu:a100:1,gres:gpu:a100:2",       3,    "a100" },
  }
  for _, c in ipairs(cases) do
    it("reads " .. c[1], function()
      local count, model, err = parse(c[1])
      assert.is_nil(err)
      assert.are.equal(c[2], count)
      assert.are.equal(c[3], model)
    end)
  end

  it("marks mixed types as false (any of several)", function()
    local count, model = parse("gres:gpu:a100:1,gres:gpu:h100:1")
    assert.are.equal(2, count)
    assert.is_false(model)
    count, model = parse("gres/gpu:2,gres/gpu:a100:2")
    assert.are.equal(4, count)
    assert.is_false(model)
  end)

  it("returns nil for no GPU at all", function()
    assert.is_nil(parse(nil))
    assert.is_nil(parse(""))
    assert.is_nil(parse("license/matlab:1"))
    assert.is_nil(parse("gres:nic:2"))
  end)

  for _, bad in ipairs({ "gres:gpu:", "gres:gpu:a100:x", "gres:gpu:a:b:c", "gres:gpu:-1",
                         "gres:gpu;4", "gres:gpu:a100:%s" }) do
    it("reports malformed " .. bad, function()
      local count, model, err = parse(bad)
      assert.is_nil(count)
      assert.is_nil(model)
      assert.matches("malformed", err)
    end)
  end
end)

describe("recording the block need", function()
  before_each(function() H.load() end)

  local cases = {
    -- name, job fields, expected admin comment
    { "--gres=gpu:4", { tres_per_node = "gres:gpu:4" },
      "defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1" },
    { "--gpus-per-node=2 -N2", { tres_per_node = "gres:gpu:2", min_nodes = 2, max_nodes = 2 },
      "defrag:nvlink=2 defrag:gpn=2 defrag:nodes=2" },
    { "--gpus=8 (fits one node)", { tres_per_job = "gres:gpu:8" },
      "defrag:nvlink=8 defrag:gpn=8 defrag:nodes=1" },
    { "--gpus=16 (two full nodes)", { tres_per_job = "gres/gpu:16" },
      "defrag:nvlink=8 defrag:gpn=8 defrag:nodes=2" },
    { "--gpus=5 -N2 (uneven: the larger share)", { tres_per_job = "gres:gpu:5", min_nodes = 2, max_nodes = 2 },
      "defrag:nvlink=3 defrag:gpn=3 defrag:nodes=2" },
    { "--gpus=a100:3 -N1-2", { tres_per_job = "gres:gpu:a100:3", min_nodes = 1, max_nodes = 2 },
      "defrag:nvlink=3 defrag:gpn=3 defrag:nodes=1" },
    { "--gres=gpu:h100:2 typed", { tres_per_node = "gres/gpu:h100:2" },
      "defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1" },
    { "--gpus-per-task=1 -n4 --ntasks-per-node=2",
      { tres_per_task = "gres/gpu=1", num_tasks = 4, ntasks_per_node = 2 },
      "defrag:nvlink=2 defrag:gpn=2 defrag:nodes=2" },
    { "--gpus-per-task=2 -n2 (spreadable)", { tres_per_task = "gres:gpu:2", num_tasks = 2 },
      "defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1" },
    { "--gpus-per-socket=1 --sockets-per-node=2",
      { tres_per_socket = "gres:gpu:1", sockets_per_node = 2 },
      "defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1" },
    { "--gres=gpu:1", { tres_per_node = "gres:gpu:1" },
      "defrag:nvlink=1 defrag:gpn=1 defrag:nodes=1" },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local rc, jd = H.submit(c[2])
      assert.are.equal(0, rc)
      assert.are.equal(c[3], jd.admin_comment)
      assert.are.same({}, slurm.logs.error)
    end)
  end

  it("records nvlink=0 when the user says any GPUs will do", function()
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:4", comment = "defrag:anygpu" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=0 defrag:gpn=4 defrag:nodes=1", jd.admin_comment)
  end)

  it("appends to an existing admin comment without clobbering it", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:2", admin_comment = "site:budget=42 note" })
    assert.are.equal("site:budget=42 note defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1",
      jd.admin_comment)
  end)

  it("replaces stale defrag keys instead of duplicating them", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:2",
      admin_comment = "defrag:nvlink=8 keep defrag:gpn=8 defrag:nodes=9" })
    assert.are.equal("keep defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1", jd.admin_comment)
  end)

  it("ignores keys a user writes into the comment (only the admin comment counts)", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:4", comment = "defrag:nvlink=1 defrag:gpn=1" })
    assert.are.equal("defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1", jd.admin_comment)
  end)

  it("leaves jobs without GPUs untouched", function()
    local rc, jd = H.submit({ admin_comment = "x" })
    assert.are.equal(0, rc)
    assert.are.equal("x", jd.admin_comment)
    assert.is_nil(jd.prefer)
    rc, jd = H.submit({ tres_per_node = "gres:nic:1" })
    assert.are.equal(0, rc)
    assert.is_nil(jd.admin_comment)
  end)

  it("treats zero GPUs as a CPU job (accepted, nothing recorded)", function()
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:0" })
    assert.are.equal(0, rc)
    assert.is_nil(jd.admin_comment)
    assert.is_nil(jd.prefer)
  end)

  it("records a request in a partition missing from the table, refusing nothing", function()
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:64", partition = "newpart" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=64 defrag:gpn=64 defrag:nodes=1", jd.admin_comment)
  end)
end)

describe("refusing what no node can ever satisfy", function()
  before_each(function() H.load() end)

  local function refused(fields)
    slurm.logs.user = {}
    local rc, jd = H.submit(fields)
    assert.are.equal(ESLURM_INVALID_GRES, rc)
    assert.are.equal(1, #slurm.logs.user)
    local msg = slurm.logs.user[1]
    assert.is_nil(string.find(msg, "\n"), "one line")
    assert.is_nil(jd.admin_comment)
    return msg
  end

  it("4 NVLink GPUs on a partition of NVLink-pair nodes", function()
    local msg = refused({ tres_per_node = "gres:gpu:4", partition = "pairs" })
    assert.are.equal("defrag: 4 NVLink-connected GPUs per node requested, but nodes in "
      .. "partition pairs offer NVLink blocks of at most 2 GPUs; add --comment=defrag:anygpu "
      .. "if any 4 GPUs will do", msg)
  end)

  it("a typed request only the pair nodes could hold", function()
    local msg = refused({ tres_per_node = "gres/gpu:h100:4" })
    assert.matches("4 NVLink%-connected h100 GPUs per node requested", msg)
    assert.matches("at most 2 GPUs", msg)
  end)

  it("names the missing sizes on a DGX-1 (no 5-GPU block)", function()
    local msg = refused({ tres_per_node = "gres:gpu:5", partition = "dgx1" })
    assert.matches("NVLink blocks of only 1%-4,8 GPUs", msg)
  end)

  it("accepts block sizes the DGX-1 does have", function()
    for _, n in ipairs({ 1, 2, 3, 4, 8 }) do
      local rc = H.submit({ tres_per_node = "gres:gpu:" .. n, partition = "dgx1" })
      assert.are.equal(0, rc, n .. " GPUs")
    end
  end)

  it("more GPUs per node than any node has, even with anygpu", function()
    local msg = refused({ tres_per_node = "gres:gpu:9", comment = "defrag:anygpu" })
    assert.are.equal("defrag: 9 GPUs per node requested, but the largest node in partition "
      .. "gpu has 8", msg)
  end)

  it("a GPU type the partition does not have", function()
    local msg = refused({ tres_per_node = "gres:gpu:v100:1" })
    assert.are.equal("defrag: partition gpu has no v100 GPUs", msg)
  end)

  it("GPUs in a partition of CPU nodes", function()
    local msg = refused({ tres_per_node = "gres:gpu:1", partition = "cpu" })
    assert.matches("largest node in partition cpu has 0", msg)
  end)

  it("more nodes with a block than the partition has", function()
    local msg = refused({ tres_per_node = "gres:gpu:h100:2", min_nodes = 2, max_nodes = 2 })
    assert.are.equal("defrag: 2 nodes with 2 NVLink-connected h100 GPUs each requested, but "
      .. "partition gpu has only 1 such node", msg)
  end)

  it("huge counts", function()
    local msg = refused({ tres_per_node = "gres:gpu:99999999999" })
    assert.matches("^defrag: ", msg)
    msg = refused({ tres_per_job = "gres:gpu:4g" })
    assert.matches("^defrag: ", msg)
  end)

  it("lets anygpu through where only the NVLink block is missing", function()
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:4", partition = "pairs",
      comment = "please defrag:anygpu" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=0 defrag:gpn=4 defrag:nodes=1", jd.admin_comment)
  end)

  it("accepts when any one of several partitions can satisfy it", function()
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:4", partition = "pairs,gpu" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1", jd.admin_comment)
  end)

  it("never refuses because of a node of unknown topology", function()
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:4", partition = "mystery" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1", jd.admin_comment)
  end)

  it("only records when the table says enforce = false", function()
    local path = H.tmpfile([[return { version = 1, default_partition = "p", enforce = false,
      partitions = { p = { types = { { gpus = 8, nodes = 1, models = {}, block_sizes = {1, 2} } } } } }]])
    H.load(path)
    os.remove(path)
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:4" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1", jd.admin_comment)
  end)
end)

describe("packing hint", function()
  before_each(function() H.load() end)

  it("prefers partly used nodes for a small one-node job", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1" })
    assert.are.equal("defrag_partial", jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:4" })
    assert.are.equal("defrag_partial", jd.prefer)
  end)

  it("leaves large, multi-node and exclusive jobs alone", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:8" })
    assert.is_nil(jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", min_nodes = 2, max_nodes = 2 })
    assert.is_nil(jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", shared = 0 })
    assert.is_nil(jd.prefer)
  end)

  it("never overrides the user's own --prefer", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1", prefer = "fast_disk" })
    assert.are.equal("fast_disk", jd.prefer)
  end)

  it("names the feature only where a node has it (else a pending job shows BadConstraints)",
    function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1", partition = "pairs" })
    assert.are.equal("defrag_partial", jd.prefer)
    -- dgx1's nodes do not have it, so neither a job there nor one that may run there
    for _, parts in ipairs({ "dgx1", "gpu,dgx1", "nosuchpartition" }) do
      _, jd = H.submit({ tres_per_node = "gres:gpu:1", partition = parts })
      assert.is_nil(jd.prefer, parts)
      assert.are.equal("defrag:nvlink=1 defrag:gpn=1 defrag:nodes=1", jd.admin_comment)
    end
    -- a table that does not say where the feature is (rendered before the list existed)
    local path = H.tmpfile([[return { version = 1, default_partition = "p",
      partitions = { p = { types = { { gpus = 8, nodes = 1, models = {} } } } },
      pack = { feature = "defrag_partial", max_gpus = 4 } }]])
    H.load(path)
    os.remove(path)
    _, jd = H.submit({ tres_per_node = "gres:gpu:1" })
    assert.is_nil(jd.prefer)
    assert.are.same({}, slurm.logs.error)
  end)

  it("gives a one-node CPU-only job the CPU fit class, when the table has one", function()
    local _, jd = H.submit({})
    assert.is_nil(jd.prefer) -- the fixture's pack section has no cpu_feature
    local path = H.tmpfile([[return { version = 1, default_partition = "p",
      partitions = { p = { types = { { gpus = 8, nodes = 1, models = {} } } } },
      pack = { fit_prefix = "defrag_fit", fit_sizes = { 1, 2 },
        shard_feature = "defrag_fitshard", cpu_feature = "defrag_fitcpu" } }]])
    H.load(path)
    os.remove(path)
    _, jd = H.submit({})
    assert.are.equal("defrag_fitcpu", jd.prefer)
    assert.is_nil(jd.admin_comment) -- nothing recorded for a job without GPUs
    _, jd = H.submit({ tres_per_node = "gres/shard:300" })
    assert.are.equal("defrag_fitshard", jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:2" })
    assert.are.equal("defrag_fit2", jd.prefer)
    _, jd = H.submit({ min_nodes = 2, max_nodes = 2 })
    assert.is_nil(jd.prefer)
    _, jd = H.submit({ shared = 0 })
    assert.is_nil(jd.prefer)
    _, jd = H.submit({ prefer = "fast_disk" })
    assert.are.equal("fast_disk", jd.prefer)
  end)

  it("adds the CPU bucket to a GPU class when the table has cpu_buckets", function()
    local path = H.tmpfile([[return { version = 1, default_partition = "p",
      partitions = { p = { types = { { gpus = 8, nodes = 1, models = {} } } } },
      pack = { fit_prefix = "defrag_fit", fit_sizes = { 1, 2 }, cpu_buckets = { 2, 8 },
        shard_feature = "defrag_fitshard", cpu_feature = "defrag_fitcpu" } }]])
    H.load(path)
    os.remove(path)
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1", min_cpus = 4 })
    assert.are.equal("defrag_fit1c8", jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", cpus_per_task = 2 })
    assert.are.equal("defrag_fit1c2", jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres/shard:300", min_cpus = 1 })
    assert.are.equal("defrag_fitshardc2", jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:2", min_cpus = 16 })
    assert.is_nil(jd.prefer) -- above every bucket: no hint
    _, jd = H.submit({ min_cpus = 16 })
    assert.are.equal("defrag_fitcpu", jd.prefer) -- CPU-only jobs have no buckets
  end)

  it("is off when the table has no pack section", function()
    local path = H.tmpfile([[return { version = 1, default_partition = "p",
      partitions = { p = { types = { { gpus = 8, nodes = 1, models = {} } } } } }]])
    H.load(path)
    os.remove(path)
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1" })
    assert.is_nil(jd.prefer)
    assert.is_not_nil(jd.admin_comment)
  end)
end)

describe("queue order (short_first)", function()
  -- 10 GPU nodes: 8 common (96 CPUs, 384 GB), 1 big (128 CPUs, 768 GB) of type g3,
  -- 1 of type v100 (no cpus/mem given: it fits any CPUs and memory); scarce: <= 2 nodes
  local function table_with(extra)
    return [[return { version = 1, default_partition = "p",
      short_first = { share = 0.2, span = 600 ]] .. (extra or "") .. [[ },
      partitions = { p = { types = {
        { gpus = 8, nodes = 8, models = { g2 = 8 }, cpus = 96, mem = 393216 },
        { gpus = 8, nodes = 1, models = { g3 = 8 }, cpus = 128, mem = 786432 },
        { gpus = 8, nodes = 1, models = { v100 = 8 } },
        { gpus = 0, nodes = 4, models = {} } } } } }]]
  end
  local function load_with(extra)
    local path = H.tmpfile(table_with(extra))
    H.load(path)
    os.remove(path)
  end
  local OFFSET = 2147483648
  local SCARCE = 2 * 600 -- tier 2

  it("boosts a job only few nodes hold: tier 2, shortest limit first", function()
    load_with()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 120, time_limit = 90 })
    assert.are.equal(OFFSET - SCARCE - 510, jd.nice)
    _, jd = H.submit({ tres_per_node = "gres:gpu:8", pn_min_memory = 500000,
      time_limit = 30 })
    assert.are.equal(OFFSET - SCARCE - 570, jd.nice)
    _, jd = H.submit({ tres_per_node = "gres:gpu:g3:1", time_limit = 5 }) -- one g3 node
    assert.are.equal(OFFSET - SCARCE - 595, jd.nice)
    -- no limit, or one of span or more: the tier alone
    _, jd = H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 120 })
    assert.are.equal(OFFSET - SCARCE, jd.nice)
    _, jd = H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 120, time_limit = 9000 })
    assert.are.equal(OFFSET - SCARCE, jd.nice)
  end)

  it("adds to the user's own nice, within Slurm's range", function()
    load_with()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 120, time_limit = 60,
      nice = OFFSET + 100 })
    assert.are.equal(OFFSET + 100 - SCARCE - 540, jd.nice)
    _, jd = H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 120, time_limit = 60,
      nice = 5 }) -- a user nice near the bottom of the range
    assert.are.equal(OFFSET - 2147483645, jd.nice)
  end)

  it("leaves other jobs alone unless large_gpus or all says otherwise", function()
    load_with()
    for _, f in ipairs({
      { tres_per_node = "gres:gpu:8", min_cpus = 64, time_limit = 60 },
      { tres_per_node = "gres:gpu:1", time_limit = 60 },
      { tres_per_node = "gres:gpu:8", min_cpus = 120, min_nodes = 2, max_nodes = 2 },
      { min_cpus = 120, time_limit = 60 },
      { tres_per_node = "gres/shard:2", time_limit = 60 },
    }) do
      local _, jd = H.submit(f)
      assert.is_nil(jd.nice)
    end
    local _, jd = H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 200, time_limit = 60 })
    assert.are.equal(OFFSET - SCARCE - 540, jd.nice) -- only the v100 node (cpus unknown)
  end)

  it("large_gpus: tier 1 for jobs of that many GPUs per node, multi-node too", function()
    load_with(", large_gpus = 4")
    local _, jd = H.submit({ tres_per_node = "gres:gpu:4", time_limit = 100 })
    assert.are.equal(OFFSET - 600 - 500, jd.nice)
    _, jd = H.submit({ tres_per_node = "gres:gpu:8", min_nodes = 2, max_nodes = 2 })
    assert.are.equal(OFFSET - 600, jd.nice)
    _, jd = H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 120, time_limit = 100 })
    assert.are.equal(OFFSET - SCARCE - 500, jd.nice) -- scarce beats large
    _, jd = H.submit({ tres_per_node = "gres:gpu:2", time_limit = 100 })
    assert.is_nil(jd.nice)
  end)

  it("all: every job by its limit, CPU-only and shard jobs included", function()
    load_with(", all = true, large_gpus = 4")
    local _, jd = H.submit({ min_cpus = 2, time_limit = 100 })
    assert.are.equal(OFFSET - 500, jd.nice)
    _, jd = H.submit({ tres_per_node = "gres/shard:2", time_limit = 590 })
    assert.are.equal(OFFSET - 10, jd.nice)
    _, jd = H.submit({ tres_per_node = "gres:gpu:1" }) -- no limit: no boost
    assert.is_nil(jd.nice)
    _, jd = H.submit({ tres_per_node = "gres:gpu:4", time_limit = 100 })
    assert.are.equal(OFFSET - 600 - 500, jd.nice)
  end)

  it("cap: the boost scaled into [0, cap], its order kept", function()
    load_with(", all = true, large_gpus = 4, cap = 90") -- 3 x span = 1800 raw -> 90
    local function nice(f)
      local _, jd = H.submit(f)
      return jd.nice and (OFFSET - jd.nice) or 0
    end
    local scarce1 = nice({ tres_per_node = "gres:gpu:8", min_cpus = 120, time_limit = 1 })
    local scarce = nice({ tres_per_node = "gres:gpu:8", min_cpus = 120, time_limit = 90 })
    local large = nice({ tres_per_node = "gres:gpu:4", time_limit = 100 })
    local other = nice({ min_cpus = 2, time_limit = 100 })
    local long = nice({ min_cpus = 2, time_limit = 9000 })
    -- floor(raw x 90 / 1800): 1799 -> 89, 1710 -> 85, 1100 -> 55, 500 -> 25, 0
    assert.are.same({ 89, 85, 55, 25, 0 }, { scarce1, scarce, large, other, long })
    -- the user's own nice still adds
    local _, jd = H.submit({ tres_per_node = "gres:gpu:4", time_limit = 100,
      nice = OFFSET + 7 })
    assert.are.equal(OFFSET + 7 - 55, jd.nice)
  end)

  it("cap = 0 changes no job (priority/basic, or no weights)", function()
    load_with(", all = true, large_gpus = 4, cap = 0")
    for _, f in ipairs({
      { tres_per_node = "gres:gpu:8", min_cpus = 120, time_limit = 1 },
      { tres_per_node = "gres:gpu:4", time_limit = 100 },
      { min_cpus = 2, time_limit = 100 },
    }) do
      local _, jd = H.submit(f)
      assert.is_nil(jd.nice)
    end
  end)

  it("cap above the raw range scales up, never past the cap", function()
    load_with(", all = true, large_gpus = 4, cap = 1300000") -- weights in the millions
    local _, jd = H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 120, time_limit = 1 })
    assert.are.equal(OFFSET - math.floor(1799 * 1300000 / 1800), jd.nice)
    assert.is_true(OFFSET - jd.nice <= 1300000)
  end)

  it("is off without a short_first entry, and never on job modify", function()
    H.load()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:h100:8", time_limit = 60 })
    assert.is_nil(jd.nice)
    load_with(", all = true")
    jd = H.job({ min_cpus = 2, time_limit = 100 })
    slurm_job_modify(jd, { job_id = 7, admin_comment = "" }, {}, 0)
    assert.is_nil(jd.nice)
  end)

  it("refuses a malformed entry when the table loads", function()
    for _, bad in ipairs({ "short_first = 1", "short_first = { share = 0 }",
      "short_first = { share = 0.1, span = -1 }", "short_first = { share = 2, span = 5 }",
      "short_first = { share = 0.1, span = 5, all = 1 }",
      "short_first = { share = 0.1, span = 5, large_gpus = 0 }",
      "short_first = { share = 0.1, span = 5, cap = -1 }",
      "short_first = { share = 0.1, span = 5, cap = 1.5 }",
      "short_first = { share = 0.1, span = 5, cap = 2147483646 }",
      "short_first = { share = 0.1, span = 5, cap = '10' }" }) do
      local t = slurm_defrag.prepare_table((loadstring or load)("return { version = 1, "
        .. "partitions = {}, " .. bad .. " }")())
      assert.is_nil(t)
    end
  end)
end)

describe("keeping the scarce nodes (short_first.keep)", function()
  -- 10 GPU nodes: 8 common g2 (96 CPUs, 384 GB), 2 big g3 (128 CPUs, 768 GB) kept;
  -- 4 CPU-only nodes; scarce: <= 2 GPU nodes
  local function load_keep(keep, hosts)
    slurm_defrag.keep_reset()
    local path = H.tmpfile([[return { version = 1, default_partition = "p",
      short_first = { share = 0.2, span = 600, ]] .. keep .. [[ },
      partitions = { p = { types = {
        { gpus = 8, nodes = 8, models = { g2 = 8 }, cpus = 96, mem = 393216,
          hosts = "g2n[1-8]" },
        { gpus = 8, nodes = 2, models = { g3 = 8 }, cpus = 128, mem = 786432,
          hosts = ]] .. hosts .. [[, kept = true },
        { gpus = 0, nodes = 4, models = {}, cpus = 64, hosts = "c[1-4]" } } } } }]])
    H.load(path)
    os.remove(path)
  end

  it("adds the kept hosts to --exclude of a job that fits elsewhere", function()
    load_keep("keep = { demand = 0, window = 60 }", '"g3n[1-2]"')
    for _, f in ipairs({
      { tres_per_node = "gres:gpu:8", min_cpus = 64 },
      { tres_per_node = "gres:gpu:1" },
      { tres_per_node = "gres/shard:2" },
      { min_cpus = 8 },
    }) do
      local _, jd = H.submit(f)
      assert.are.equal("g3n[1-2]", jd.exc_nodes)
    end
    -- the user's own --exclude: left as it is (it may cover every other node)
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1", exc_nodes = "g2n[1-8]" })
    assert.are.equal("g2n[1-8]", jd.exc_nodes)
  end)

  it("leaves alone the jobs only the kept nodes hold, named nodes, multi-node jobs", function()
    load_keep("keep = { demand = 0, window = 60 }", '"g3n[1-2]"')
    for _, f in ipairs({
      { tres_per_node = "gres:gpu:8", min_cpus = 120 },        -- tier 2
      { tres_per_node = "gres:gpu:g3:1" },                      -- only g3 has the model
      { tres_per_node = "gres:gpu:2", pn_min_memory = 500000 }, -- memory: only g3
      { tres_per_node = "gres:gpu:1", req_nodes = "g3n1" },     -- -w
      { tres_per_node = "gres:gpu:1", features = "bigmem" },    -- maybe only on g3
      { tres_per_node = "gres:gpu:1", reservation = "r1" },
      { tres_per_node = "gres:gpu:8", min_nodes = 2, max_nodes = 2 },
      { min_cpus = 100 },                                       -- CPUs: only g3
    }) do
      local _, jd = H.submit(f)
      assert.is_nil(jd.exc_nodes)
    end
  end)

  it("is off without keep and on job modify", function()
    load_keep("", '"g3n[1-2]"')
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1" })
    assert.is_nil(jd.exc_nodes)
    load_keep("keep = { demand = 0, window = 60 }", '"g3n[1-2]"')
    jd = H.job({ tres_per_node = "gres:gpu:1" })
    slurm_job_modify(jd, { job_id = 7, admin_comment = "" }, {}, 0)
    assert.is_nil(jd.exc_nodes)
  end)

  it("keeps only while the scarce jobs of the last window ask for demand x the time", function()
    -- 2 kept nodes, a 60-minute window: 120 node-minutes; demand 0.5 = 60 minutes asked
    load_keep("keep = { demand = 0.5, window = 60 }", '"g3n[1-2]"')
    local now = 1000000
    slurm_defrag.clock = function() return now end
    local small = { tres_per_node = "gres:gpu:1" }
    local big = { tres_per_node = "gres:gpu:8", min_cpus = 120 }
    local _, jd = H.submit(small)
    assert.is_nil(jd.exc_nodes) -- no scarce job seen
    big.time_limit = 40
    H.submit(big) -- 40 of 120
    _, jd = H.submit(small)
    assert.is_nil(jd.exc_nodes)
    big.time_limit = 500 -- counts as the window at most: 60
    H.submit(big)
    _, jd = H.submit(small)
    assert.are.equal("g3n[1-2]", jd.exc_nodes)
    now = now + 30 * 60 -- both still in the window
    _, jd = H.submit(small)
    assert.are.equal("g3n[1-2]", jd.exc_nodes)
    now = now + 31 * 60 -- both aged out
    _, jd = H.submit(small)
    assert.is_nil(jd.exc_nodes)
    H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 120 }) -- no limit: the window
    _, jd = H.submit(small)
    assert.are.equal("g3n[1-2]", jd.exc_nodes)
    now = now - 7200 -- the clock went back: entries from the future are dropped
    _, jd = H.submit(small)
    assert.is_nil(jd.exc_nodes)
    -- a scarce job that names a feature still counts (it still wants the kept nodes)
    H.submit({ tres_per_node = "gres:gpu:8", min_cpus = 120, features = "bigmem" })
    _, jd = H.submit(small)
    assert.are.equal("g3n[1-2]", jd.exc_nodes)
    -- shard jobs are never scarce (short_first gives them no tier): no demand from them
    load_keep("keep = { demand = 0.5, window = 60 }", '"g3n[1-2]"')
    for _ = 1, 5 do H.submit({ tres_per_node = "gres/shard:2", time_limit = 60 }) end
    _, jd = H.submit(small)
    assert.is_nil(jd.exc_nodes)
    slurm_defrag.clock = os.time
  end)

  it("refuses a kept type without hosts, or a malformed keep", function()
    for _, bad in ipairs({
      "short_first = { share = 0.1, span = 5, keep = 1 }",
      "short_first = { share = 0.1, span = 5, keep = { demand = -1, window = 5 } }",
      "short_first = { share = 0.1, span = 5, keep = { demand = 0.5 } }",
      "short_first = { share = 0.1, span = 5, keep = { demand = 0.5, window = 0 } }",
      "partitions = { p = { types = { { gpus = 8, nodes = 1, kept = true } } } }",
      "partitions = { p = { types = { { gpus = 8, nodes = 1, kept = true, hosts = '' } } } }",
      "partitions = { p = { types = { { gpus = 8, nodes = 1, kept = 'yes', hosts = 'a' } } } }",
      "partitions = { p = { types = { { gpus = 8, nodes = 0, kept = true, hosts = 'a' } } } }",
    }) do
      local src = "return { version = 1, " .. bad .. " }"
      if not string.find(bad, "partitions", 1, true) then
        src = "return { version = 1, partitions = {}, " .. bad .. " }"
      end
      assert.is_nil(slurm_defrag.prepare_table((loadstring or load)(src)()))
    end
  end)
end)

describe("protect opt-out", function()
  before_each(function() H.load() end)

  it("records defrag:protect from the user's comment", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:2", comment = "ckpt-less run defrag:protect" })
    assert.are.equal("defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1 defrag:protect", jd.admin_comment)
  end)

  it("records it for a CPU job too", function()
    local _, jd = H.submit({ comment = "defrag:protect" })
    assert.are.equal("defrag:protect", jd.admin_comment)
  end)

  it("combines with anygpu", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:2", comment = "defrag:anygpu,defrag:protect" })
    assert.are.equal("defrag:nvlink=0 defrag:gpn=2 defrag:nodes=1 defrag:protect", jd.admin_comment)
  end)

  it("is ignored, with a note to the user, when the policy forbids it", function()
    local path = H.tmpfile([[return { version = 1, default_partition = "p", allow_protect = false,
      partitions = { p = { types = { { gpus = 8, nodes = 1, models = {} } } } } }]])
    H.load(path)
    os.remove(path)
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:2", comment = "defrag:protect" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1", jd.admin_comment)
    assert.matches("not allowed", slurm.logs.user[1])
  end)
end)

describe("odd input never breaks slurmctld", function()
  before_each(function() H.load() end)

  it("refuses a GPU request it cannot read, naming it", function()
    local rc, jd = H.submit({ tres_per_node = "gres/gpu:abc:xyz:1" })
    assert.are.equal(ESLURM_INVALID_GRES, rc)
    assert.is_nil(jd.admin_comment)
    assert.are.equal("defrag: cannot read the GPU request: malformed GPU request "
      .. "'gres/gpu:abc:xyz:1' (expected gpu[:type][:count])", slurm.logs.user[1])
    assert.are.same({}, slurm.logs.error)
  end)

  it("leaves an unreadable GPU request to Slurm when not enforcing", function()
    H.load("tests/fixtures/does-not-exist.lua")
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:a:b:c", comment = "defrag:protect" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:protect", jd.admin_comment)
  end)

  it("survives '%' in user text (Slurm's log functions format their argument)", function()
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:%d%s", comment = "100% %s" })
    assert.are.equal(ESLURM_INVALID_GRES, rc)
    assert.matches("gres:gpu:%%d%%s", slurm.logs.user[1])
    rc, jd = H.submit({ tres_per_node = "gres:gpu:2", comment = "100% defrag:protect %s" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1 defrag:protect", jd.admin_comment)
    rc = H.submit({ tres_per_node = "gres:gpu:4", partition = "pa%srs" })
    assert.are.equal(0, rc)
  end)

  it("accepts the job unchanged when the hook itself fails", function()
    local jd = setmetatable({}, { __index = function(_, k)
      if k == "tres_per_node" then error("boom") end
      return nil
    end })
    local rc = slurm_job_submit(jd, {}, 1000)
    assert.are.equal(0, rc)
    assert.are.equal(1, #slurm.logs.error)
    assert.matches("internal error, job accepted unchanged: .*boom", slurm.logs.error[1])
    assert.is_nil(rawget(jd, "admin_comment"))
  end)

  it("treats unset numbers (NO_VAL, NO_VAL16, INFINITE, nil) as not given", function()
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:2", min_nodes = 4294967295,
      max_nodes = nil, num_tasks = 65534 })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1", jd.admin_comment)
  end)

  it("records nothing for an absurd count when not enforcing (Slurm refuses it)", function()
    H.load("tests/fixtures/does-not-exist.lua")
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:99999999999" })
    assert.are.equal(0, rc)
    assert.is_nil(jd.admin_comment)
  end)

  it("records without refusing when the node table is missing", function()
    H.load("tests/fixtures/does-not-exist.lua")
    assert.matches("cannot load node table", slurm.logs.error[1])
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:64" })
    assert.are.equal(0, rc)
    assert.are.equal("defrag:nvlink=64 defrag:gpn=64 defrag:nodes=1", jd.admin_comment)
    assert.is_nil(jd.prefer)
  end)

  it("records without refusing when the node table is broken", function()
    for _, text in ipairs({ "return {", "return 42", "return { version = 2, partitions = {} }",
                            "return { version = 1, partitions = { p = { types = { { } } } } }",
                            "error('x')" }) do
      local path = H.tmpfile(text)
      H.load(path)
      os.remove(path)
      assert.are.equal(1, #slurm.logs.error, text)
      local rc, jd = H.submit({ tres_per_node = "gres:gpu:4", partition = "pairs" })
      assert.are.equal(0, rc)
      assert.are.equal("defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1", jd.admin_comment)
    end
  end)
end)

describe("hostile sizes: every field capped, parsed in one pass", function()
  before_each(function() H.load() end)

  it("trims by walking the bytes (the old pattern backtracked)", function()
    local trim = slurm_defrag.trim
    assert.are.equal("", trim(""))
    assert.are.equal("", trim(" \t\n\r\v\f "))
    assert.are.equal("a b", trim("\t a b \n"))
    assert.are.equal("x" .. string.rep(" ", 40000) .. "x", trim(" x" .. string.rep(" ", 40000) .. "x "))
    assert.are.same({ 2 }, { slurm_defrag.parse_gpu_tres(" gres/gpu:2 ") })
  end)

  it("reads a shard count after the last ':' or '='", function()
    assert.are.equal(3, slurm_defrag.asks_shards("gres/shard:a100:3"))
    assert.are.equal(true, slurm_defrag.asks_shards("gres/shard:a100:"))
    assert.are.equal(true, slurm_defrag.asks_shards("shard:" .. string.rep("a", 40000) .. "="))
    assert.are.equal(true, slurm_defrag.asks_shards(string.rep("x", 4097)))
  end)

  it("refuses a GPU request over its cap as unreadable (when enforcing)", function()
    local spec = "gres/gpu:1," .. string.rep(" ", 4096)
    local rc, jd = H.submit({ tres_per_node = spec })
    assert.are.equal(ESLURM_INVALID_GRES, rc)
    assert.are.equal("defrag: cannot read the GPU request: longer than 4096 characters"
      .. " (expected gpu[:type][:count])", slurm.logs.user[1])
    assert.is_nil(jd.admin_comment)
    -- just under the cap it is read
    local items = string.rep("gres/gpu:1,", 372)
    assert.is_true(#items <= 4096)
    assert.are.equal(372, (slurm_defrag.parse_gpu_tres(items)))
  end)

  it("leaves a GPU request over its cap to Slurm when not enforcing", function()
    H.load("tests/fixtures/does-not-exist.lua")
    local rc, jd = H.submit({ tres_per_task = string.rep("9", 5000) })
    assert.are.equal(0, rc)
    assert.is_nil(jd.admin_comment)
  end)

  it("leaves the job as it is when another field is over its cap, and says so", function()
    for field, cap in pairs({ comment = 16384, admin_comment = 16384, partition = 4096 }) do
      H.load()
      local rc, jd = H.submit({ tres_per_node = "gres:gpu:4", partition = "pairs",
        [field] = string.rep("defrag:protect ", cap):sub(1, cap + 1) })
      assert.are.equal(0, rc, field)
      assert.is_nil(jd.prefer, field)
      if field ~= "admin_comment" then assert.is_nil(jd.admin_comment, field) end
      assert.are.same({}, slurm.logs.user, field)
      assert.matches(field .. " longer than " .. cap .. " characters; job left as it is",
        slurm.logs.info[#slurm.logs.info], 1, true)
    end
    -- on modify too (the record's value counts where the update gives none)
    H.load()
    local jd = H.job({ tres_per_node = "gres:gpu:2" })
    local rc = slurm_job_modify(jd, { job_id = 5, min_nodes = 1, max_nodes = 1,
      comment = string.rep("x", 16385) }, {}, 0)
    assert.are.equal(0, rc)
    assert.is_nil(jd.admin_comment)
  end)

  it("cuts user text short in messages and log lines", function()
    local rc = H.submit({ name = string.rep("n", 100000), tres_per_node = "gres/gpu:x:y:"
      .. string.rep("z", 3000) })
    assert.are.equal(ESLURM_INVALID_GRES, rc)
    assert.is_true(#slurm.logs.user[1] < 200)
    assert.is_true(#slurm.logs.info[#slurm.logs.info] < 400)
  end)
end)

describe("defrag reservations are the service's", function()
  local ESLURM_RESERVATION_ACCESS, ESLURM_RESERVATION_INVALID = 2052, 2053
  before_each(function()
    H.load()
    slurm_defrag.nodes.slurm_user_uid = 64030
    slurm_defrag.nodes.service_uid = 2000
  end)

  local function submit_as(uid, resv)
    local jd = H.job({ tres_per_node = "gres:gpu:1", reservation = resv })
    return slurm_job_submit(jd, {}, uid), jd
  end

  it("refuses a user's submission into a defrag-* reservation, saying why", function()
    for _, resv in ipairs({ "defrag-12", "maint,defrag-12", " defrag-12", "DEFRAG-12" }) do
      H.load()
      local rc, jd = submit_as(1000, resv)
      assert.are.equal(ESLURM_RESERVATION_ACCESS, rc, resv)
      assert.is_nil(jd.admin_comment)
      assert.matches("^defrag: reservation .*%-12 holds nodes for the one job slurm%-defrag"
        .. " is starting there; no other job may use it$", slurm.logs.user[1])
      assert.matches("refused: defrag: reservation", slurm.logs.info[#slurm.logs.info], 1, true)
    end
  end)

  it("lets other reservations, and root, SlurmUser and the service through", function()
    for _, resv in ipairs({ "maint", "defrag", "my-defrag-1", "", nil }) do
      assert.are.equal(0, (submit_as(1000, resv)), tostring(resv))
    end
    for _, uid in ipairs({ 0, 64030, 2000 }) do
      assert.are.equal(0, (submit_as(uid, "defrag-12")), uid)
    end
    assert.are.same({}, slurm.logs.user)
  end)

  it("refuses a user's update into one, and lets the service's hand-over pass", function()
    local rec = { job_id = 42, min_nodes = 1, max_nodes = 1, partition = "gpu",
      tres_per_node = "gres:gpu:1" }
    local jd = H.job({ reservation = "defrag-7" })
    assert.are.equal(ESLURM_RESERVATION_ACCESS, slurm_job_modify(jd, rec, {}, 1000))
    assert.are.same({}, slurm.logs.user) -- 22.05: no user message from modify
    jd = H.job({ reservation = "defrag-7" })
    assert.are.equal(0, slurm_job_modify(jd, rec, {}, 2000)) -- the service (Operator)
    assert.is_nil(jd.admin_comment) -- nothing else changes
    assert.are.equal(0, slurm_job_modify(H.job({ reservation = "defrag-7" }), rec, {}, 0))
    -- leaving a reservation is anyone's right
    assert.are.equal(0, slurm_job_modify(H.job({ reservation = "" }), rec, {}, 1000))
  end)

  it("tells the user why on Slurm versions that can (24.11)", function()
    _G.slurm = H.new_slurm()
    slurm.ESLURM_INVALID_GRES = 2072
    slurm.ESLURM_RESERVATION_ACCESS = 2052
    _G.DEFRAG_NODES_FILE = H.FIXTURE
    dofile("job_submit.lua")
    local rec = { job_id = 42, min_nodes = 1, max_nodes = 1, partition = "gpu" }
    assert.are.equal(2052, slurm_job_modify(H.job({ reservation = "defrag-7" }), rec, {}, 1000))
    assert.matches("defrag-7 holds nodes", slurm.logs.user[1], 1, true)
  end)

  it("refuses a user's --reservation over its cap", function()
    local rc = submit_as(1000, string.rep("a,", 3000) .. "defrag-1")
    assert.are.equal(ESLURM_RESERVATION_INVALID, rc)
    assert.matches("longer than 4096", slurm.logs.user[1], 1, true)
    assert.are.equal(0, (submit_as(2000, string.rep("a,", 3000) .. "defrag-1")))
  end)

  it("without a table, lets only root use one", function()
    H.load("tests/fixtures/does-not-exist.lua")
    assert.are.equal(ESLURM_RESERVATION_ACCESS, (submit_as(2000, "defrag-1")))
    assert.are.equal(0, (submit_as(0, "defrag-1")))
  end)

  it("refuses a table whose uids are not numbers", function()
    local path = H.tmpfile([[return { version = 1, service_uid = "defrag",
      partitions = { p = { types = { { gpus = 8, nodes = 1, models = {} } } } } }]])
    H.load(path)
    os.remove(path)
    assert.matches("service_uid: not a uid", slurm.logs.error[1], 1, true)
  end)
end)

describe("job modify", function()
  before_each(function() H.load() end)

  local function rec(fields)
    local r = { job_id = 42, min_nodes = 1, max_nodes = 1, partition = "gpu" }
    for k, v in pairs(fields) do r[k] = v end
    return r
  end

  it("re-records when the GPU request changes", function()
    local jd = H.job({ tres_per_node = "gres:gpu:2" })
    local r = rec({ tres_per_node = "gres:gpu:4", admin_comment = "x defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1" })
    local rc = slurm_job_modify(jd, r, {}, 0)
    assert.are.equal(0, rc)
    assert.are.equal("x defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1", jd.admin_comment)
    assert.is_nil(jd.prefer) -- the hint is a submit-time choice
  end)

  it("ignores updates that cannot change the record", function()
    local jd = H.job({ time_limit = 60 })
    local rc = slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4" }), {}, 0)
    assert.are.equal(0, rc)
    assert.is_nil(jd.admin_comment)
  end)

  it("refuses a change to an impossible request", function()
    local jd = H.job({ partition = "pairs" })
    local rc = slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4" }), {}, 0)
    assert.are.equal(ESLURM_INVALID_GRES, rc)
    assert.matches("refused: defrag: 4 NVLink.*at most 2 GPUs", slurm.logs.info[#slurm.logs.info])
    -- 22.05 (no ESLURM_INVALID_GRES in Lua) cannot pass a message on from modify
    assert.are.same({}, slurm.logs.user)
  end)

  it("tells the user why on Slurm versions that can (24.11)", function()
    _G.slurm = H.new_slurm()
    slurm.ESLURM_INVALID_GRES = 2072
    _G.DEFRAG_NODES_FILE = H.FIXTURE
    dofile("job_submit.lua")
    local jd = H.job({ partition = "pairs" })
    local rc = slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4" }), {}, 0)
    assert.are.equal(2072, rc)
    assert.matches("at most 2 GPUs", slurm.logs.user[1])
  end)

  it("never writes the AdminComment into a user's own update (Slurm would deny it)", function()
    local keys = "defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1"
    local jd = H.job({ comment = "defrag:protect" })
    local rc = slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4", admin_comment = keys }), {}, 1000)
    assert.are.equal(0, rc)
    assert.is_nil(jd.admin_comment)
    -- ...but still refuses an impossible change
    jd = H.job({ tres_per_node = "gres:gpu:h100:4" })
    rc = slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4", admin_comment = keys }), {}, 1000)
    assert.are.equal(ESLURM_INVALID_GRES, rc)
  end)

  it("lets SlurmUser (from the table) rewrite the record like root", function()
    slurm_defrag.nodes.slurm_user_uid = 64030
    local jd = H.job({ tres_per_node = "gres:gpu:2" })
    slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4" }), {}, 64030)
    assert.are.equal("defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1", jd.admin_comment)
  end)

  it("leaves an admin's explicit AdminComment alone", function()
    local jd = H.job({ admin_comment = "by hand", tres_per_node = "gres:gpu:2" })
    slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4" }), {}, 0)
    assert.are.equal("by hand", jd.admin_comment)
  end)

  it("follows the comment for the opt-out", function()
    local keys = "defrag:nvlink=4 defrag:gpn=4 defrag:nodes=1"
    local jd = H.job({ comment = "defrag:protect" })
    slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4", admin_comment = keys }), {}, 0)
    assert.are.equal(keys .. " defrag:protect", jd.admin_comment)
    jd = H.job({ comment = "changed my mind" })
    slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4", admin_comment = keys .. " defrag:protect" }), {}, 0)
    assert.are.equal(keys, jd.admin_comment)
    -- other updates keep a recorded opt-out
    jd = H.job({ tres_per_node = "gres:gpu:2" })
    slurm_job_modify(jd, rec({ tres_per_node = "gres:gpu:4", comment = "defrag:protect",
      admin_comment = keys .. " defrag:protect" }), {}, 0)
    assert.are.equal("defrag:nvlink=2 defrag:gpn=2 defrag:nodes=1 defrag:protect", jd.admin_comment)
  end)
end)

describe("helpers", function()
  setup(function() H.load() end)

  it("formats block size lists as ranges", function()
    assert.are.equal("1-4,8", slurm_defrag.format_sizes({ 1, 2, 3, 4, 8 }))
    assert.are.equal("1,3,5-6", slurm_defrag.format_sizes({ 1, 3, 5, 6 }))
    assert.are.equal("2", slurm_defrag.format_sizes({ 2 }))
  end)

  it("matches whole tokens only", function()
    assert.is_true(slurm_defrag.has_token("a defrag:protect,b", "defrag:protect"))
    assert.is_false(slurm_defrag.has_token("defrag:protected", "defrag:protect"))
    assert.is_false(slurm_defrag.has_token(nil, "defrag:protect"))
  end)

  it("resolves the default partition from the table", function()
    assert.are.same({ "gpu" }, slurm_defrag.job_partitions(nil, slurm_defrag.nodes))
    assert.are.same({ "a", "b" }, slurm_defrag.job_partitions("a,b", slurm_defrag.nodes))
  end)
end)

describe("speed", function()
  it("costs well under a millisecond per submission (it runs under slurmctld's locks)", function()
    H.load()
    local n = 20000
    local start = os.clock()
    for i = 1, n do
      local jd = H.job({ tres_per_node = (i % 2 == 0) and "gres:gpu:4" or "gres/gpu:a100:1",
                         comment = "run " .. i, admin_comment = "note" })
      slurm_job_submit(jd, {}, 1000)
    end
    local per_job_us = (os.clock() - start) / n * 1e6
    assert.is_true(per_job_us < 200, string.format("%.1f us per job", per_job_us))
  end)
end)

describe("per-job routing (route entry, fgd-route)", function()
  -- b runs a 1-GPU job; a is idle. Mix: 1-GPU jobs, 2-GPU jobs and half-GPU shares.
  local TABLE = [[return { version = 1, default_partition = "p",
    partitions = { p = { types = { { gpus = 4, nodes = 2, models = { v100 = 4 } },
                                   { gpus = 2, nodes = 1, models = { t4 = 2 } } } } },
    route = { step = 40, shards_per_gpu = 1000,
      mix = { { cpus = 2, gpus = 1, milli = 1000, weight = 0.5 },
              { cpus = 2, gpus = 2, milli = 1000, weight = 0.3 },
              { cpus = 1, gpus = 1, milli = 500, weight = 0.2 } },
      nodes = {
        { feature = "defrag_at_a", model = "v100", free = { 1000, 1000, 1000, 1000 },
          cpus = 32, mem = 64000, idle = true },
        { feature = "defrag_at_b", model = "v100", free = { 0, 1000, 1000, 1000 },
          cpus = 28, mem = 60000, idle = false },
        { feature = "defrag_at_t", model = "t4", free = { 1000, 1000 },
          cpus = 8, mem = 8000, idle = true } } } }]]

  before_each(function()
    local path = H.tmpfile(TABLE)
    H.load(path)
    os.remove(path)
  end)

  it("names the node packing would choose, and counts what it named", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1", min_cpus = 2 })
    assert.are.equal("defrag_at_b", jd.prefer) -- in use: a stays whole
    _, jd = H.submit({ tres_per_node = "gres:gpu:2", min_cpus = 2 })
    assert.are.equal("defrag_at_b", jd.prefer) -- one free GPU left there
    _, jd = H.submit({ tres_per_node = "gres:gpu:2", min_cpus = 2 })
    assert.are.equal("defrag_at_t", jd.prefer) -- b is full in the copy; t fills exactly
    _, jd = H.submit({ tres_per_node = "gres:gpu:2", min_cpus = 2 })
    assert.are.equal("defrag_at_a", jd.prefer)
    assert.is_not_nil(string.find(jd.admin_comment, "defrag:gpn=2", 1, true))
  end)

  it("routes shards and CPU-only jobs, and honours type, CPUs and memory", function()
    local _, jd = H.submit({ tres_per_node = "gres/shard:500", min_cpus = 1 })
    assert.are.equal("defrag_at_b", jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres/gpu:t4:1", min_cpus = 1 })
    assert.are.equal("defrag_at_t", jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", min_cpus = 30 })
    assert.are.equal("defrag_at_a", jd.prefer) -- only a has 30 CPUs free
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", min_cpus = 1, pn_min_memory = 62000 })
    assert.are.equal("defrag_at_a", jd.prefer)
    -- --mem-per-cpu sets bit 63: not a per-node amount, so memory does not count
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", min_cpus = 1,
      pn_min_memory = 2 ^ 63 + 100 })
    assert.is_not_nil(jd.prefer)
    _, jd = H.submit({ min_cpus = 1 })
    assert.is_not_nil(string.find(jd.prefer, "^defrag_at_"))
  end)

  it("gives no route to a job the keeping excludes (the route might name a kept node)",
    function()
    local kept = TABLE:gsub("{ gpus = 2, nodes = 1, models = { t4 = 2 } }",
      "{ gpus = 2, nodes = 1, models = { t4 = 2 }, kept = true, hosts = \"t1\" }")
      :gsub("default_partition = \"p\",",
        "default_partition = \"p\", short_first = { share = 0.5, span = 600,"
        .. " keep = { demand = 0, window = 60 } },")
    local path = H.tmpfile(kept)
    H.load(path)
    os.remove(path)
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1", min_cpus = 2 })
    assert.are.equal("t1", jd.exc_nodes)
    assert.is_nil(jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres/gpu:t4:1", min_cpus = 1 }) -- only t1 holds it
    assert.is_nil(jd.exc_nodes)
    assert.are.equal("defrag_at_t", jd.prefer)
  end)

  it("hints a job that cannot start yet but does not count it", function()
    -- --begin later, a dependency: each would take b's last free GPUs in the copy
    for _, later in ipairs({ { begin_time = os.time() + 3600 },
                             { dependency = "afterok:68" } }) do
      local path = H.tmpfile(TABLE)
      H.load(path)
      os.remove(path)
      local desc = { tres_per_node = "gres:gpu:3", min_cpus = 2 }
      for k, v in pairs(later) do desc[k] = v end
      local _, jd = H.submit(desc)
      assert.are.equal("defrag_at_b", jd.prefer)
      _, jd = H.submit({ tres_per_node = "gres:gpu:3", min_cpus = 2 })
      assert.are.equal("defrag_at_b", jd.prefer) -- b still has its 3 free GPUs
      _, jd = H.submit({ tres_per_node = "gres:gpu:3", min_cpus = 2 })
      assert.are.equal("defrag_at_a", jd.prefer) -- the one counted took them
    end
  end)

  it("counts a held job: its release time is not known", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:3", min_cpus = 2, priority = 0 })
    assert.are.equal("defrag_at_b", jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:3", min_cpus = 2 })
    assert.are.equal("defrag_at_a", jd.prefer) -- b's 3 free GPUs went to the held job
  end)

  it("sends a share of a GPU only to a node with shards", function()
    local path = H.tmpfile((string.gsub(TABLE, 'idle = false }', 'idle = false, no_shards = true }')))
    H.load(path)
    os.remove(path)
    local _, jd = H.submit({ tres_per_node = "gres/shard:500", min_cpus = 1 })
    assert.are.equal("defrag_at_a", jd.prefer) -- b has no shard GRES: a, the next best
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", min_cpus = 2 })
    assert.are.equal("defrag_at_b", jd.prefer) -- whole GPUs still go there
  end)

  it("leaves alone what it cannot place on one node or the user placed", function()
    local _, jd = H.submit({ tres_per_node = "gres:gpu:8" })
    assert.is_nil(jd.prefer) -- fits no node
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", min_nodes = 2, max_nodes = 2 })
    assert.is_nil(jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", shared = 0 })
    assert.is_nil(jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres:gpu:1", prefer = "fast_disk" })
    assert.are.equal("fast_disk", jd.prefer)
    _, jd = H.submit({ tres_per_node = "gres/gpu:v100:1,gres/gpu:t4:1" })
    assert.is_nil(jd.prefer) -- several types at once
  end)

  it("refuses every malformed route value at load, by name, without an error", function()
    local bad_nodes = {
      "{ feature = 'x', free = { '1000' }, cpus = 8 }",
      "{ feature = 'x', free = { true }, cpus = 8 }",
      "{ feature = 'x', free = { 1000 }, cpus = 8, model = {} }",
      "{ feature = 'x', free = { 1000 }, cpus = 8, mem = '5' }",
      "{ feature = 'x', free = { 1000 }, cpus = 0/0 }",
      "42",
    }
    for _, node in ipairs(bad_nodes) do
      local path = H.tmpfile("return { version = 1, default_partition = 'p', partitions = "
        .. "{ p = { types = { { gpus = 4, nodes = 1, models = {} } } } }, route = { "
        .. "step = 40, mix = { { cpus = 1, gpus = 1, milli = 1000, weight = 1 } }, "
        .. "nodes = { " .. node .. " } } }")
      local s = H.load(path)
      os.remove(path)
      assert.are.equal(1, #s.logs.error, node)
      assert.is_not_nil(string.find(s.logs.error[1], "route: node 1", 1, true), node)
      local rc, jd = H.submit({ tres_per_node = "gres:gpu:1" })
      assert.are.equal(0, rc)
      assert.is_nil(jd.prefer)
      assert.is_not_nil(jd.admin_comment) -- the record still works without the table
    end
  end)

  it("gives no hint to a shard count it cannot read", function()
    local _, jd = H.submit({ tres_per_node = "gres/shard:abc" })
    assert.is_nil(jd.prefer)
  end)

  it("refuses a broken route entry by name, and then hints nothing", function()
    local path = H.tmpfile([[return { version = 1, default_partition = "p",
      partitions = { p = { types = { { gpus = 4, nodes = 1, models = {} } } } },
      route = { step = 40, mix = { { cpus = 1, gpus = 1, milli = 1000, weight = 1 } },
        nodes = { { feature = "defrag_at_a", free = "all" } } } }]])
    local s = H.load(path)
    os.remove(path)
    assert.is_not_nil(string.find(s.logs.error[1], "route: node 1", 1, true))
    local rc, jd = H.submit({ tres_per_node = "gres:gpu:1" })
    assert.are.equal(0, rc)
    assert.is_nil(jd.prefer)
  end)

  it("with score = true uses FGD's integer score, ties by rank", function()
    local path = H.tmpfile([[return { version = 1, default_partition = "p",
      partitions = { p = { types = { { gpus = 4, nodes = 3, models = {} } } } },
      route = { score = true, step = 40,
        mix = { { cpus = 1, gpus = 1, milli = 1000, weight = 1 } },
        nodes = {
          { feature = "defrag_at_a", free = { 1000, 1000, 1000, 1000 }, cpus = 8, rank = 30 },
          { feature = "defrag_at_b", free = { 0, 1000, 1000, 1000 }, cpus = 8, rank = 20 },
          { feature = "defrag_at_c", free = { 1000, 1000, 1000, 1000 }, cpus = 8,
            rank = 10 } } } }]])
    H.load(path)
    os.remove(path)
    -- 1-GPU jobs raise no fragmentation anywhere: the lowest rank wins, busy or not
    local _, jd = H.submit({ tres_per_node = "gres:gpu:1" })
    assert.are.equal("defrag_at_c", jd.prefer)
    -- c now has 3 free GPUs in the copy, b 3: a 4-GPU job fits only a
    _, jd = H.submit({ tres_per_node = "gres:gpu:4" })
    assert.are.equal("defrag_at_a", jd.prefer)
  end)
end)

describe("the route file (the service's fgd-route levers)", function()
  local TABLE = [[return { version = 1, default_partition = "p",
    partitions = { p = { types = { { gpus = 4, nodes = 2, models = {} } } } },
    route_file = %q }]]
  -- The route file as the service writes it (format 2: src/slurm_defrag/actuator/
  -- route_file.py); `parts` gives a's and b's partitions ("*": not listed).
  local function route(at, valid, busy_b, parts)
    local b_free = busy_b and "0,1000,1000,1000" or "1000,1000,1000,1000"
    parts = parts or { "*", "*" }
    return "-- slurm-defrag route " .. tostring(at) .. " " .. tostring(busy_b) .. "\n"
      .. "-- comment lines are skipped\n"
      .. "route 2 " .. at .. " " .. valid .. " 40 1000 0\n"
      .. "mix 1 1 1000 1 *\n"
      .. "mix 1 4 1000 1 *\n"
      .. "node defrag_at_a - 32 -1 1 1 0 1000,1000,1000,1000 " .. parts[1] .. "\n"
      .. "node defrag_at_b - 32 -1 " .. (busy_b and "0" or "1") .. " 2 0 " .. b_free .. " "
      .. parts[2] .. "\n"
      .. "end 2 2\n"
  end
  local function write(path, text)
    local fh = assert(io.open(path, "w"))
    fh:write(text)
    fh:close()
  end
  local route_path, table_path, s
  -- forget the stamp: the next look reads the file again
  local function route_file_reset()
    local rf = slurm_defrag.route_file_state
    rf.checked, rf.stamp, rf.route = nil, nil, nil
  end

  before_each(function()
    route_path = os.tmpname()
    table_path = H.tmpfile(string.format(TABLE, route_path))
    s = H.load(table_path)
  end)
  after_each(function()
    os.remove(table_path)
    os.remove(route_path)
  end)

  local function prefer(now, fields)
    -- the script asks os.time(); the tests move the clock by hand
    local real = os.time
    os.time = function() return now end
    local _, jd = H.submit(fields or { tres_per_node = "gres:gpu:1", min_cpus = 1 })
    os.time = real
    return jd.prefer
  end

  it("routes by the file, and re-reads it only when its stamp changed", function()
    write(route_path, route(1000, 180, true))
    assert.are.equal("defrag_at_b", prefer(1000)) -- b in use: a stays whole
    assert.are.equal("defrag_at_b", prefer(1000))
    assert.are.equal("defrag_at_b", prefer(1001))
    -- the copy counts what it routed: b has 1 GPU left, a 4-GPU job goes to a
    assert.are.equal("defrag_at_a", prefer(1001, { tres_per_node = "gres:gpu:4" }))
    -- a new cycle's file: both idle, cons_tres order (a first, the lower rank too)
    write(route_path, route(1060, 180, false))
    assert.are.equal("defrag_at_a", prefer(1060))
    assert.are.same({}, s.logs.error)
  end)

  it("looks at the stamp at most once a second", function()
    write(route_path, route(1000, 180, true))
    assert.are.equal("defrag_at_b", prefer(1000))
    write(route_path, route(1000.5, 180, false))
    -- same second: the old copy (b took the first job; b still has room)
    assert.are.equal("defrag_at_b", prefer(1000))
    assert.are.equal("defrag_at_a", prefer(1001)) -- a second later: the new file
  end)

  it("ignores a stale route, and a missing file means no routing", function()
    assert.is_nil(prefer(1000)) -- no file yet
    write(route_path, route(1000, 180, true))
    assert.are.equal("defrag_at_b", prefer(1100))
    assert.is_nil(prefer(1181)) -- the service stopped writing
    assert.is_nil(prefer(1182))
    local stale = 0
    for _, line in ipairs(s.logs.info) do
      if string.find(line, "not within 180 s", 1, true) then stale = stale + 1 end
    end
    assert.are.equal(1, stale) -- said once
    os.remove(route_path)
    assert.is_nil(prefer(1200))
    assert.are.same({}, s.logs.error)
  end)

  it("refuses a broken route file by name, keeps taking jobs, and recovers", function()
    write(route_path, "-- slurm-defrag route x\nroute 2 1000 step 40\n")
    local rc = H.submit({ tres_per_node = "gres:gpu:1" })
    assert.are.equal(0, rc)
    assert.is_nil(prefer(1000))
    assert.matches("line 2: not a route file of format 2", s.logs.error[1], 1, true)
    write(route_path, "-- slurm-defrag route y\nroute 2 1000 9 40 1000 0\nend 0 0\n")
    assert.is_nil(prefer(1002))
    assert.is_not_nil(string.find(s.logs.error[2], "route: mix weights sum to 0", 1, true))
    write(route_path, route(1004, 180, true):gsub("end 2 2", "end 2 3"))
    assert.is_nil(prefer(1004))
    assert.is_not_nil(string.find(s.logs.error[3], "line 8: the end line counts", 1, true))
    write(route_path, route(1006, 180, true))
    assert.are.equal("defrag_at_b", prefer(1006))
    assert.are.equal(3, #s.logs.error)
  end)

  it("refuses, by line, every record that is not one", function()
    local good = route(1000, 180, true)
    local function refused(text, needle)
      write(route_path, text)
      local before = #s.logs.error
      assert.is_nil(prefer(1000), text)
      route_file_reset()
      assert.are.equal(before + 1, #s.logs.error, text)
      assert.is_not_nil(string.find(s.logs.error[#s.logs.error], needle, 1, true),
        s.logs.error[#s.logs.error])
    end
    refused(good:gsub("end 2 2\n", ""), "no end line (cut short?)")
    refused(good .. "mix 1 1 1000 1 *\n", "line 9: text after the end line")
    refused(good:gsub("mix 1 4", "mux 1 4"), "line 5: not a route record")
    refused(good:gsub("mix 1 4 1000 1", "mix 1 4 1000"), "line 5: expected 'mix <cpus>")
    refused(good:gsub("mix 1 4 1000 1", "mix 1 4 0x10 1"), "line 5: expected 'mix")
    refused(good:gsub("mix 1 4 1000 1", "mix 1 4 1e999 1"), "line 5: expected 'mix")
    refused(good:gsub("defrag_at_a", "defrag-at%%a"), "line 6: expected 'node")
    refused(good:gsub("defrag_at_a %-", "defrag_at_a a\tb"), "line 6: expected 'node")
    refused(good:gsub("1000,1000,1000,1000 %*", "1000,,1000 *"), "line 6: expected 'node")
    refused(good:gsub("0 1000,1000,1000,1000 %*", "2 1000,1000,1000,1000 *"), "line 6:")
    refused(good:gsub("route 2 ", "route 1 "), "not a route file of format 2")
    assert.are.same({ nil, "empty" }, { slurm_defrag.parse_route("-- only a stamp\n") })
  end)

  it("reads the file as data: code, bytecode and string methods are text it refuses",
    function()
      for _, text in ipairs({
        string.dump(function() return {} end),
        "-- slurm-defrag route loop\nwhile true do end\n",
        "-- slurm-defrag route z\nreturn { x = os.execute('true') }\n",
        "-- slurm-defrag route big\nreturn { x = ('x'):rep(2^29) }\n",
        "-- slurm-defrag route v1\nreturn { generated_at = 1000, valid_s = 180, step = 40,"
          .. " mix = {}, nodes = {} }\n",
      }) do
        write(route_path, text)
        local before = #s.logs.error
        assert.is_nil(prefer(1000))
        route_file_reset()
        assert.are.equal(before + 1, #s.logs.error)
        assert.is_not_nil(string.find(s.logs.error[#s.logs.error],
          "not a route file of format 2", 1, true), s.logs.error[#s.logs.error])
      end
      write(route_path, route(1004, 180, true))
      assert.are.equal("defrag_at_b", prefer(1004)) -- it works again
    end)

  it("refuses a file over 4 MiB before reading it, and reads only the stamp's first bytes",
    function()
      local line = string.rep("-", 1023) .. "\n"
      local fh = assert(io.open(route_path, "w"))
      fh:write("-- slurm-defrag route huge " .. string.rep("x", 1000) .. "\n")
      for _ = 1, 8 * 1024 do fh:write(line) end
      fh:close()
      assert.is_nil(prefer(1000))
      assert.is_not_nil(string.find(s.logs.error[1], "larger than 4194304 bytes", 1, true))
      -- the stamp is at most the first 256 bytes
      assert.are.equal(256, #slurm_defrag.route_file_state.stamp)
    end)

  it("does not use a route dated ahead of its clock by more than its life", function()
    write(route_path, route(2000, 180, true))
    assert.is_nil(prefer(1000))
    assert.are.equal("defrag_at_b", prefer(1900))
  end)

  it("says once that the file cannot be read, and routes nothing", function()
    write(route_path, route(1000, 180, true))
    local real = io.open
    io.open = function(path, mode)
      if path == route_path then return nil, path .. ": Permission denied", 13 end
      return real(path, mode)
    end
    local a, b = prefer(1000), prefer(1001)
    io.open = real
    assert.is_nil(a)
    assert.is_nil(b)
    assert.are.equal(1, #s.logs.error)
    assert.is_not_nil(string.find(s.logs.error[1], "Permission denied", 1, true))
  end)

  it("gives no hint to a job that says itself where it runs, nor outside its partition",
    function()
      write(route_path, route(1000, 180, true))
      for _, own in ipairs({ { features = "ib" }, { req_nodes = "a" }, { exc_nodes = "b" },
                             { reservation = "maint" }, { prefer = "fast" } }) do
        own.tres_per_node, own.min_cpus = "gres:gpu:1", 1
        assert.are.equal(own.prefer, prefer(1000, own))
      end
      assert.are.equal("defrag_at_b", prefer(1000)) -- the same job without them
      -- b only in partition q: a job of p goes to a, a job of q or of p,q to b
      write(route_path, route(1001, 180, true, { "p", "q" }))
      local function in_part(part)
        return prefer(1001, { tres_per_node = "gres:gpu:1", min_cpus = 1, partition = part })
      end
      assert.are.equal("defrag_at_a", in_part("p"))
      assert.are.equal("defrag_at_b", in_part("q"))
      assert.are.equal("defrag_at_b", in_part("p,q"))
      assert.are.same({}, s.logs.error)
    end)

  it("prefers the table's own route entry (the simulator's way)", function()
    local path = H.tmpfile([[return { version = 1, default_partition = "p",
      partitions = { p = { types = { { gpus = 4, nodes = 2, models = {} } } } },
      route = { step = 40, shards_per_gpu = 1000,
        mix = { { cpus = 1, gpus = 1, milli = 1000, weight = 1 } },
        nodes = { { feature = "defrag_at_c", model = "", free = { 1000 }, cpus = 4,
                    mem = -1, idle = true, rank = 1 } } } }]])
    H.load(path)
    os.remove(path)
    write(route_path, route(1000, 180, true))
    assert.are.equal("defrag_at_c", prefer(1000))
  end)
end)
