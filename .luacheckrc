-- luacheck settings for the Lua that runs inside Slurm: templates/topograph_tp.lua (the rules)
-- and the job_submit.lua / cli_filter.lua that `generate --filter-dir` writes around it.

-- Only the globals every Lua from 5.1 to 5.4 has: Debian links Slurm with 5.1, other builds
-- with 5.3/5.4, and the same script runs on both.
std = "min"
max_line_length = 100

-- Slurm's table of log functions and return codes.
read_globals = { "slurm" }

-- The entry points job_submit/lua and cli_filter/lua call by name.
globals = {
  "slurm_job_submit",
  "slurm_job_modify",
  "slurm_cli_setup_defaults",
  "slurm_cli_pre_submit",
  "slurm_cli_post_submit",
}

-- Checked on its own, the rules file meets FACTS as a global: the generated files define it as
-- a local right before the rules (templates/topograph_facts.lua.j2).
files["templates/topograph_tp.lua"] = { read_globals = { "FACTS" } }
