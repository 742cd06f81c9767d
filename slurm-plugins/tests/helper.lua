-- Test helpers: a stub of the `slurm` table slurmctld gives job_submit.lua, a fake job
-- description with Slurm's "unset" defaults, and a loader that runs the script afresh.
local H = {}

H.NO_VAL = 4294967294
H.NO_VAL16 = 65534
H.FIXTURE = "tests/fixtures/defrag_nodes.lua"

-- Like slurmctld's: the log functions run string.format on their arguments, so calling
-- one with user text as the format would blow up here exactly as it would in Slurm.
function H.new_slurm()
  local s = {
    SUCCESS = 0, ERROR = -1, FAILURE = -1,
    NO_VAL = H.NO_VAL, NO_VAL16 = H.NO_VAL16, NO_VAL8 = 254,
    INFINITE = 4294967295, JOB_SHARED_NONE = 0, JOB_SHARED_OK = 1,
    ESLURM_ACCESS_DENIED = 2002,
  }
  s.logs = { info = {}, debug = {}, error = {}, user = {} }
  local function recorder(kind)
    return function(fmt, ...)
      table.insert(s.logs[kind], string.format(fmt, ...))
    end
  end
  s.log_info = recorder("info")
  s.log_verbose = recorder("debug")
  s.log_debug = recorder("debug")
  s.log_error = recorder("error")
  s.log_user = recorder("user")
  return s
end

-- Load job_submit.lua as slurmctld would, with the given node table (nil = fixture).
function H.load(table_path)
  _G.slurm = H.new_slurm()
  _G.DEFRAG_NODES_FILE = table_path or H.FIXTURE
  _G.slurm_defrag = nil
  _G.slurm_job_submit = nil
  _G.slurm_job_modify = nil
  dofile("job_submit.lua")
  return _G.slurm
end

-- A job_desc as the plugin sees it from `sbatch` with no options, overridden by `fields`.
function H.job(fields)
  local jd = {
    min_nodes = H.NO_VAL, max_nodes = H.NO_VAL, num_tasks = H.NO_VAL,
    ntasks_per_node = H.NO_VAL16, sockets_per_node = H.NO_VAL16, shared = H.NO_VAL16,
    user_id = 1000, name = "test",
  }
  for k, v in pairs(fields or {}) do jd[k] = v end
  return jd
end

-- Submit and return rc, job_desc, slurm stub.
function H.submit(fields)
  local jd = H.job(fields)
  local rc = slurm_job_submit(jd, {}, 1000)
  return rc, jd
end

-- Write `text` to a temporary file and return its name.
function H.tmpfile(text)
  local name = os.tmpname()
  local fh = assert(io.open(name, "w"))
  fh:write(text)
  fh:close()
  return name
end

return H
