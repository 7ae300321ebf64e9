"""Fake Slurm Lua environment for running the generated filters under lupa.

The fakes copy the behaviour that was measured on real Slurm (DESIGN.md §4) and that the
filters must survive: ``job_desc`` is a proxy whose numbers read back as floats on Lua 5.3+,
``spank_job_env`` is indexed from 0, assigning nil or a wrong type raises, unknown fields (such
as ``segment_size`` before 25.11.2) are only logged, and reading ``assoc_qos`` is an error.
``options`` is a proxy that ``pairs()`` cannot see into, reads sentinels for unset options
(``nodes`` = "1-0", ``segment`` = ``switches`` = "unset", ``verbose`` = "0"), raises on nil,
and "exits the client" on a ``segment``/``switches`` value sbatch would refuse (such as
"2.0"). ``options.spank[plugin]["tp-size"]`` reads nil when --tp-size was not given (measured
with the generated plugin on 24.11.5 and 26.05.5; ``spank_unset=True`` gives the "unset" some
SPANK flags read instead); ``["pp-size"]`` likewise.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import pytest

RUNTIMES = ("lupa.lua51", "lupa.lua54")

#: What ``options[name]`` reads in sbatch's slurm_cli_pre_submit when the user gave nothing, as
#: measured on sbatch 24.11.5 and 26.05.5 (tests/integration/test_tp_filter.py re-measures it).
#: Options missing here (partition, gres, gpus-per-node, jobid, ...) read nil; srun reads
#: ``type`` = "srun" and ``jobid`` = "unset" outside an allocation, the job id inside one.
OPTION_SENTINELS: dict[str, str] = {
    "type": "sbatch",
    "nodes": "1-0",
    "segment": "unset",
    "switches": "unset",
    "exclusive": "unset",
    "ntasks-per-node": "-2",
    "verbose": "0",
    "quiet": "0",
}

ERRORS = {
    "SUCCESS": 0,
    "ERROR": -1,
    "ESLURM_INVALID_NODE_COUNT": 2006,
    "ESLURM_INVALID_GRES": 2072,
    "ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE": 2067,
}

FAKE_LUA = r"""
FAKE = { log = {}, sets = {}, reads = {}, exited = false }

local function logger(level)
  return function(fmt, ...)
    -- the real slurm.log_* format their first argument like string.format
    local msg = string.format(fmt, ...)
    FAKE.log[#FAKE.log + 1] = { level, msg }
  end
end

slurm = {
  log_info = logger("info"), log_verbose = logger("verbose"), log_debug = logger("debug"),
  log_error = logger("error"), log_user = logger("user"),
}

function FAKE.reset()
  FAKE.log = {}
  FAKE.sets = {}
  FAKE.reads = {}
  FAKE.exited = false
end

local NUMERIC = {
  min_nodes = true, max_nodes = true, req_switch = true, wait4switch = true,
  segment_size = true, spank_job_env_size = true, shared = true, num_tasks = true,
}
local STRING = {
  partition = true, tres_per_node = true, tres_per_job = true, comment = true,
  admin_comment = true, extra = true, features = true, name = true,
}

local function record_set(k, v)
  FAKE.sets[#FAKE.sets + 1] = { k, v }
end

function FAKE.job_desc(spec, env_list, segment_supported)
  local store = {}
  for k, v in pairs(spec) do
    store[k] = v
  end
  local n = 0
  local env = {}
  if env_list ~= nil then
    for i, e in ipairs(env_list) do
      env[i - 1] = e -- indexed from 0, like job_submit/lua builds it
      n = i
    end
  end
  if n > 0 then
    store.spank_job_env = env
  end
  store.spank_job_env_size = n
  return setmetatable({}, {
    __index = function(_, k)
      FAKE.reads[k] = true
      if k == "assoc_qos" then
        error("job_desc.assoc_qos read: crashes slurmctld 24.11")
      end
      if k == "segment_size" and not segment_supported then
        return nil
      end
      local v = store[k]
      if type(v) == "number" then
        return v + 0.0 -- lua_pushnumber: a float on Lua 5.3+
      end
      return v
    end,
    __newindex = function(_, k, v)
      if k == "segment_size" and not segment_supported then
        FAKE.log[#FAKE.log + 1] = { "error", "_set_job_field: unrecognized field: " .. k }
        return
      end
      if NUMERIC[k] then
        local num = tonumber(v)
        if num == nil or (type(v) ~= "number" and type(v) ~= "string") then
          error("bad argument #3 to '__newindex' (number expected, got " .. type(v) .. ")")
        end
        store[k] = num
      elseif STRING[k] then
        if type(v) ~= "string" and type(v) ~= "number" then
          error("bad argument #3 to '__newindex' (string expected, got " .. type(v) .. ")")
        end
        store[k] = tostring(v)
      else
        FAKE.log[#FAKE.log + 1] = { "error", "_set_job_field: unrecognized field: " .. k }
        return
      end
      record_set(k, store[k])
    end,
  })
end

local function valid_switches(s)
  return string.match(s, "^%d+$") or string.match(s, "^%d+@%d%d:%d%d:%d%d$")
    or string.match(s, "^%d+@%d+%-%d%d:%d%d:%d%d$")
end

-- A proxy that fails on any read: stands in for an internal fault of the filter.
function FAKE.broken()
  return setmetatable({}, {
    __index = function(_, k)
      error("simulated fault reading " .. tostring(k))
    end,
    __newindex = function(_, k)
      error("simulated fault writing " .. tostring(k))
    end,
  })
end

function FAKE.options(spec, plugin, tp_value, spank_unset, sentinels, pp_value)
  local store = {}
  for k, v in pairs(sentinels) do
    store[k] = v
  end
  for k, v in pairs(spec) do
    store[k] = v
  end
  return setmetatable({}, {
    __index = function(_, k)
      FAKE.reads[k] = true
      if k == "spank" then
        local t = {}
        local tp, pp = tp_value, pp_value
        if spank_unset then
          tp = tp or "unset"
          pp = pp or "unset"
        end
        t[plugin] = { ["tp-size"] = tp, ["pp-size"] = pp }
        return t
      end
      return store[k]
    end,
    __newindex = function(_, k, v)
      if type(v) ~= "string" and type(v) ~= "number" then
        error("bad argument #2 to '__newindex' (string expected, got " .. type(v) .. ")")
      end
      local s = tostring(v) -- luaL_checkstring: 2.0 becomes "2.0" on Lua 5.3+
      if (k == "segment" and not string.match(s, "^%d+$"))
          or (k == "switches" and not valid_switches(s)) then
        FAKE.exited = k .. "=" .. s
        error("client exited: invalid --" .. k .. " value " .. s)
      end
      store[k] = s
      record_set(k, s)
    end,
  })
end
"""


@dataclass
class Outcome:
    """What one call of a filter did."""

    rc: int
    log: list[tuple[str, str]]
    sets: dict[str, Any]
    reads: set[str]
    exited: str | None = None
    order: list[str] = field(default_factory=list)

    def messages(self, level: str) -> list[str]:
        return [msg for lvl, msg in self.log if lvl == level]


class LuaFilter:
    """One generated script loaded into one Lua runtime with the fakes."""

    def __init__(self, runtime: str, script: str, *, errors: dict[str, int] | None = None):
        self.runtime = runtime
        module = importlib.import_module(runtime)
        self.lua = module.LuaRuntime(unpack_returned_tuples=True)
        self.lua.execute(FAKE_LUA)
        slurm = self.lua.globals().slurm
        for name, value in (ERRORS if errors is None else errors).items():
            slurm[name] = value
        self.load_rc = self.lua.execute(script)
        self.g = self.lua.globals()

    def _outcome(self, rc: Any) -> Outcome:
        fake = self.g.FAKE
        log = [(str(e[1]), str(e[2])) for e in fake.log.values()]
        sets: dict[str, Any] = {}
        order = []
        for entry in fake.sets.values():
            sets[str(entry[1])] = entry[2]
            order.append(str(entry[1]))
        reads = {str(k) for k in fake.reads}
        exited = fake.exited or None
        return Outcome(int(rc), log, sets, reads, exited, order)

    def job_submit(
        self,
        fields: dict[str, Any] | None = None,
        env: list[str] | None = None,
        *,
        uid: int = 1000,
        segment_supported: bool = False,
    ) -> Outcome:
        self.g.FAKE.reset()
        spec = self.lua.table_from(fields or {})
        env_tbl = self.lua.table_from(env or [])
        job_desc = self.g.FAKE.job_desc(spec, env_tbl, segment_supported)
        rc = self.g.slurm_job_submit(job_desc, self.lua.table(), uid)
        out = self._outcome(rc)
        out.job_desc = job_desc  # type: ignore[attr-defined]
        return out

    def job_modify(
        self,
        changes: dict[str, Any],
        admin_comment: str | None,
        *,
        uid: int = 0,
        segment_supported: bool = False,
    ) -> Outcome:
        """slurm_job_modify for a change (job_desc fields) to a job with this AdminComment."""
        self.g.FAKE.reset()
        job_desc = self.g.FAKE.job_desc(self.lua.table_from(changes), None, segment_supported)
        job_rec = self.lua.table_from(
            {} if admin_comment is None else {"admin_comment": admin_comment}
        )
        rc = self.g.slurm_job_modify(job_desc, job_rec, self.lua.table(), uid)
        return self._outcome(rc)

    def cli(
        self,
        options: dict[str, Any] | None = None,
        tp: str | None = None,
        *,
        pp: str | None = None,
        plugin: str = "tpsize",
        spank_unset: bool = False,
    ) -> Outcome:
        self.g.FAKE.reset()
        spec = self.lua.table_from(options or {})
        sentinels = self.lua.table_from(OPTION_SENTINELS)
        opts = self.g.FAKE.options(spec, plugin, tp, spank_unset, sentinels, pp)
        rc = self.g.slurm_cli_pre_submit(opts, 0)
        return self._outcome(rc)

    def job_submit_broken(self) -> Outcome:
        """slurm_job_submit with a job_desc that raises on every access."""
        self.g.FAKE.reset()
        rc = self.g.slurm_job_submit(self.g.FAKE.broken(), self.lua.table(), 1000)
        return self._outcome(rc)

    def cli_broken(self) -> Outcome:
        """slurm_cli_pre_submit with options that raise on every access."""
        self.g.FAKE.reset()
        rc = self.g.slurm_cli_pre_submit(self.g.FAKE.broken(), 0)
        return self._outcome(rc)


def runtime_or_skip(name: str) -> str:
    """The lupa runtime *name* for a ``runtime`` fixture; the test skips when this lupa build
    lacks it."""
    try:
        importlib.import_module(name)
    except ImportError:
        pytest.skip(f"{name} not available in this lupa build")
    return name


def tp_env(value: str, plugin: str = "tpsize", option: str = "tp") -> str:
    """The spank_job_env entry the SPANK plugin leaves for --tp-size=value (``option="pp"``:
    --pp-size=value)."""
    return f"_SLURM_SPANK_OPTION_{plugin}_{option}_size={value}"
