-- topograph_tp rules for --tp-size / --pp-size placement: pure Lua, never run through Jinja.
--
-- Not a script of its own: topograph-slurm puts the cluster facts (a local FACTS table,
-- rendered from templates/topograph_facts.lua.j2) right before this text, in the generated
-- topograph_tp.lua and in the copies inlined into job_submit.lua and cli_filter.lua. A site may
-- override this file in `generate --templates DIR`.
--
-- decide() and the helpers above the adapters are pure functions over plain values (no slurm
-- table, no job_desc, no options). The adapters at the end read a request from job_desc
-- (job_submit.lua) or options (cli_filter.lua), call decide() and apply the decision. Runs on
-- Lua 5.1 and 5.3+ alike (no goto, no integer division, no bit operators; integers are
-- formatted with string.format("%d", math.floor(x)) because 5.3+ reads every Slurm number as
-- a float).

local M = {}

M.FACTS = FACTS

local floor = math.floor
local format = string.format

-- Whether some partition has a site default --tp-size; without one, a job that gives no
-- --tp-size needs no further look (most jobs: slurmctld runs this for every submission).
M.ANY_DEFAULT_TP = false
for _, part in pairs(M.FACTS.partitions) do
  if part.default_tp ~= nil then
    M.ANY_DEFAULT_TP = true
  end
end

-- "%d" of a whole number; tostring() would print "4.0" under Lua 5.3+.
local function fmt_int(x)
  return format("%d", floor(x))
end
M.fmt_int = fmt_int

local function is_count(x)
  return type(x) == "number" and x >= 1 and x < 2147483648 and x == floor(x)
end

-- A positive whole number from a number or a string of digits (at most 9 of them), else nil.
function M.parse_count(v)
  if type(v) == "number" then
    if is_count(v) then
      return floor(v)
    end
    return nil
  end
  if type(v) ~= "string" then
    return nil
  end
  local digits = string.match(v, "^%s*(%d+)%s*$")
  if digits == nil or string.len(digits) > 9 then
    return nil
  end
  local n = tonumber(digits)
  if n == nil or n < 1 then
    return nil
  end
  return floor(n)
end

-- GPUs per node from a TRES/GRES string ("gres/gpu:4", "gres/gpu:h100:4", "gpu:2,nic:1").
-- Returns the count (0 included), or nil when the string names no GPU.
function M.gpus_from_tres(s)
  if type(s) ~= "string" then
    return nil
  end
  for item in string.gmatch(s, "[^,]+") do
    local rest = string.match(item, "^%s*gres[/:]gpu(.*)$")
    if rest == nil then
      rest = string.match(item, "^%s*gpu(.*)$")
    end
    if rest ~= nil then
      rest = string.gsub(rest, "%s+$", "")
      if rest == "" then
        return 1
      end
      if string.sub(rest, 1, 1) == ":" then
        local count = string.match(rest, ":(%d+)$")
        if count ~= nil then
          if string.len(count) > 9 then
            return nil
          end
          return floor(tonumber(count))
        end
        return 1
      end
    end
  end
  return nil
end

-- GPUs per node from a --gpus-per-node value ("4", "h100:4"); nil when unset or unreadable.
function M.gpus_from_count(s)
  if type(s) == "number" then
    return M.parse_count(s)
  end
  if type(s) ~= "string" then
    return nil
  end
  local count = string.match(s, "^%s*(%d+)%s*$") or string.match(s, ":(%d+)%s*$")
  if count == nil or string.len(count) > 9 then
    return nil
  end
  return floor(tonumber(count))
end

-- Node count from the cli_filter "nodes" option: "4" -> 4; "4-4" -> 4; "4-8" -> nil, true
-- (a range); "1-0" (unset sentinel), "", nil -> nil.
function M.nodes_from_option(s)
  if type(s) == "number" then
    return M.parse_count(s), false
  end
  if type(s) ~= "string" then
    return nil, false
  end
  local n = M.parse_count(s)
  if n ~= nil then
    return n, false
  end
  local lo, hi = string.match(s, "^%s*(%d+)%s*%-%s*(%d*)%s*$")
  if lo == nil then
    return nil, false
  end
  local a = M.parse_count(lo)
  local b = M.parse_count(hi)
  if a ~= nil and b ~= nil and a == b then
    return a, false
  end
  if b == nil and (a == nil or a <= 1) then
    return nil, false
  end
  return nil, true
end

-- Slurm time string for a --switches wait: "HH:MM:SS", or "D-HH:MM:SS" from a day on.
function M.fmt_wait(seconds)
  local s = floor(seconds)
  if s < 0 then
    s = 0
  end
  local days = floor(s / 86400)
  local rem = s - days * 86400
  local hms = format("%02d:%02d:%02d", floor(rem / 3600), floor((rem % 3600) / 60), rem % 60)
  if days > 0 then
    return format("%d-%s", days, hms)
  end
  return hms
end

-- "-N 4 or -N 8" style alternatives for a node count that is not a multiple of k (the option
-- is "-N " unless given: job_modify speaks scontrol's "NumNodes=").
local function node_choices(n, k, option)
  option = option or "-N "
  local lo = floor(n / k) * k
  local hi = lo + k
  if lo >= k then
    return format("%s%d or %s%d", option, lo, option, hi)
  end
  return format("%s%d", option, hi)
end

-- "--tp-size=1, 2 or 4": the values that keep groups inside one node of g GPUs.
local function divisor_choices(g)
  local list = {}
  for d = 1, g do
    if g % d == 0 then
      list[#list + 1] = format("%d", d)
    end
    if #list >= 8 then
      break
    end
  end
  if #list == 1 then
    return "--tp-size=" .. list[1]
  end
  local last = table.remove(list)
  return "--tp-size=" .. table.concat(list, ", ") .. " or " .. last
end

local function reject(code, message)
  return { action = "reject", code = code, message = message }
end

local function gcd(a, b)
  while b ~= 0 do
    a, b = b, a % b
  end
  return a
end

-- Where the nodes the placement keeps together (`keep`) go on a block partition: --segment=keep
-- unless the user's own --segment holds whole units (`what` names them in messages).
local function place_block(d, part, n, req, keep, what)
  local s = req.segment
  if s == nil then
    d.segment = keep
    return d
  end
  if s % keep ~= 0 then
    return reject("ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE", format(
      "--segment=%d would split %s of %d nodes (%s): use --segment=%d or leave --segment out",
      s, what, keep, d.label, keep))
  end
  if s > part.base_block then
    return reject("ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE", format(
      "--segment=%d is larger than a block (%d nodes): use --segment=%d", s,
      part.base_block, keep))
  end
  if n % s ~= 0 then
    return reject("ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE", format(
      "--segment=%d does not divide -N %d: use --segment=%d", s, n, keep))
  end
  d.segment = s
  d.user_segment = true
  return d
end

-- --switches for a tree partition: the fewest leaves that hold the job (a user's own count
-- when it is enough).
local function place_tree(d, part, n, req)
  local need = floor((n + part.leaf_size - 1) / part.leaf_size)
  if part.max_leaves ~= nil and need > part.max_leaves then
    return reject("ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE", format(
      "-N %d needs %d leaf switches of %d nodes, but the partition has only %d",
      n, need, part.leaf_size, part.max_leaves))
  end
  local sw = need
  local wait = M.FACTS.switch_wait
  if req.switches ~= nil then
    if req.switches < need then
      return reject("ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE", format(
        "--switches=%d cannot hold -N %d (a leaf switch has %d nodes): " ..
        "use --switches=%d or leave --switches out", req.switches, n, part.leaf_size, need))
    end
    sw = req.switches
    d.user_switches = true
    if req.wait ~= nil then
      wait = req.wait
    end
  end
  d.switches = sw
  d.wait = wait
  return d
end

-- The node count of a job whose whole units (TP groups, or model replicas with --pp-size)
-- span `unit` nodes: a fixed multiple of `unit`, or the one message that says which would do.
local function check_nodes(d, n, req, unit)
  if d.pp == nil then
    local tp, k = d.tp, unit
    if n == nil and req.nodes_range then
      return format("--tp-size=%d needs %d nodes per group and a fixed node count, not a " ..
        "range: use -N %d or another multiple of %d", tp, k, k, k)
    elseif n == nil then
      return format("--tp-size=%d needs %d nodes per group: give the node count with -N " ..
        "(a multiple of %d, e.g. -N %d)", tp, k, k, k)
    elseif n % k ~= 0 then
      return format("--tp-size=%d needs %d nodes per group; -N %d is not a multiple of %d: " ..
        "use %s", tp, k, n, k, node_choices(n, k))
    end
    return nil
  end
  local r, g = d.tp * d.pp, d.gpus_per_node
  if n == nil and req.nodes_range then
    return format("%s makes model replicas of %d GPUs and needs a fixed node count, not a " ..
      "range: use -N %d or another multiple of %d", d.label, r, unit, unit)
  elseif n == nil then
    return format("%s makes model replicas of %d GPUs: give the node count with -N " ..
      "(a multiple of %d, e.g. -N %d)", d.label, r, unit, unit)
  elseif n % unit ~= 0 then
    return format("%s makes model replicas of %d GPUs; -N %d gives %d GPUs (%d per node), " ..
      "not a whole number of replicas: use %s", d.label, r, n, n * g, g, node_choices(n, unit))
  end
  return nil
end

-- The rules for one partition. tp, pp (or nil), n (or nil), g are whole numbers; req carries
-- the user's own segment / switches / wait (or nil) and whether -N was a range.
--
-- A TP group spans k = tp/g nodes (1 when tp <= g); with --pp-size, a model replica is tp*pp
-- GPUs, and the smallest whole number of nodes that holds whole replicas is
-- u = tp*pp / gcd(tp*pp, g) (one replica when tp*pp is a multiple of g, several when not).
-- The placement keeps u nodes together when they fit one base block / leaf, else k (TP
-- groups whole, replicas across blocks), and nothing when that is one node.
local function decide_partition(tp, pp, label, part, g, n, req)
  if g < 1 then
    return reject("ESLURM_INVALID_GRES",
      format("%s needs GPUs, but the job asks for none per node", label))
  end
  local d = { action = "accept", tp = tp, pp = pp, label = label, gpus_per_node = g,
    group_nodes = 1 }
  local k = 1
  if tp <= g then
    if g % tp ~= 0 then
      return reject("ESLURM_INVALID_GRES", format(
        "--tp-size=%d does not divide the %d GPUs of a node, so TP groups would straddle " ..
        "nodes: use %s, or a multiple of %d", tp, g, divisor_choices(g), g))
    end
  elseif tp % g ~= 0 then
    local lo = floor(tp / g) * g
    return reject("ESLURM_INVALID_GRES", format(
      "--tp-size=%d is not a multiple of the %d GPUs per node: use --tp-size=%d or --tp-size=%d",
      tp, g, lo, lo + g))
  else
    k = floor(tp / g)
  end
  d.group_nodes = k
  if part.topology == "block" and k > part.base_block then
    return reject("ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE", format(
      "--tp-size=%d needs %d nodes per group, but a block has only %d nodes (%d GPUs each): " ..
      "the largest --tp-size that fits one block is %d", tp, k, part.base_block, g,
      part.base_block * g))
  end
  local unit, keep = k, k
  if pp ~= nil then
    unit = floor(tp * pp / gcd(tp * pp, g))
    d.replica_nodes = unit
    local room = nil
    if part.topology == "block" then
      room = part.base_block
    elseif part.topology == "tree" then
      room = part.leaf_size
    end
    if room ~= nil and unit <= room then
      keep, d.unit = unit, "replica"
    elseif room ~= nil then
      d.unit = "group"
    end
  end
  if unit == 1 then
    return d
  end
  local bad = check_nodes(d, n, req, unit)
  if bad ~= nil then
    return reject("ESLURM_INVALID_NODE_COUNT", bad)
  end
  if keep == 1 then
    return d
  end
  if part.topology == "block" then
    local what = "TP groups"
    if keep ~= k then
      what = "model replicas"
    end
    return place_block(d, part, n, req, keep, what)
  elseif part.topology == "tree" then
    return place_tree(d, part, n, req)
  end
  return d
end

-- Partition names of a request ("a,b" -> {"a","b"}); the default partition when none given.
local function partition_names(partition)
  local names = {}
  if type(partition) == "string" then
    for name in string.gmatch(partition, "[^,]+") do
      names[#names + 1] = name
    end
  end
  if #names == 0 and M.FACTS.default_partition ~= nil then
    names[1] = M.FACTS.default_partition
  end
  return names
end

local function same_placement(a, b)
  return a.group_nodes == b.group_nodes and a.segment == b.segment and a.switches == b.switches
    and a.wait == b.wait and a.replica_nodes == b.replica_nodes and a.unit == b.unit
end

-- Summary for logs and -v: "--tp-size=16 on gpu: 4 GPUs/node, 4 node(s) per TP group -> ...".
local function describe(d)
  local where = ""
  if d.partition ~= nil then
    where = " on " .. d.partition
  end
  local what = format("%s%s: %d GPUs/node, %d node(s) per TP group", d.label, where,
    d.gpus_per_node, d.group_nodes)
  if d.pp ~= nil then
    what = what .. format(", replicas of %d GPUs in units of %d node(s)", d.tp * d.pp,
      d.replica_nodes)
    if d.unit == "group" then
      what = what .. " (more than a block or leaf: only TP groups kept whole)"
    end
  end
  if d.segment ~= nil then
    what = what .. format(" -> --segment=%d", d.segment)
  elseif d.switches ~= nil then
    what = what .. format(" -> --switches=%d@%s", d.switches, M.fmt_wait(d.wait))
  else
    what = what .. " -> no placement change needed"
  end
  if d.source == "default" then
    what = what .. " (site default --tp-size)"
  end
  return what
end

-- The rejection of a --tp-size / --pp-size value that is not a whole number in range.
local function bad_size(name, raw)
  local shown = tostring(raw)
  if type(raw) == "number" then
    shown = format("%.17g", raw)
  end
  if string.len(shown) > 40 then
    shown = string.sub(shown, 1, 40) .. "..."
  end
  -- control characters would garble logs (and Lua 5.1's %s stops at a NUL)
  shown = string.gsub(shown, "%c", "?")
  return reject("ESLURM_INVALID_GRES", format(
    "%s must be a whole number from 1 to %d, got '%s'", name, M.FACTS.max_tp, shown))
end

-- The rules with an explicit tp and/or pp (strings or numbers from the user or the site; a
-- --pp-size without --tp-size means tp = 1, as in Megatron-Core).
local function decide_tp(tp_raw, pp_raw, req, source)
  local tp = 1
  if tp_raw ~= nil then
    tp = M.parse_count(tp_raw)
    if tp == nil or tp > M.FACTS.max_tp then
      return bad_size("--tp-size", tp_raw)
    end
  end
  local pp = nil
  local label = format("--tp-size=%d", tp)
  if pp_raw ~= nil then
    pp = M.parse_count(pp_raw)
    if pp == nil or pp > M.FACTS.max_tp then
      return bad_size("--pp-size", pp_raw)
    end
    if tp_raw == nil then
      label = format("--pp-size=%d (--tp-size=1)", pp)
    else
      label = format("--tp-size=%d --pp-size=%d", tp, pp)
    end
  end
  local names = partition_names(req.partition)
  local chosen = nil
  for i = 1, #names do
    local part = M.FACTS.partitions[names[i]]
    if part ~= nil then
      local g = req.gpus
      if g == nil then
        g = part.gpus_per_node
      end
      local d = decide_partition(tp, pp, label, part, g, req.nodes, req)
      if d.action == "reject" then
        if #names > 1 then
          d.message = "partition " .. names[i] .. ": " .. d.message
        end
        return d
      end
      d.partition = names[i]
      if chosen == nil then
        chosen = d
      elseif not same_placement(chosen, d) then
        return reject("ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE", format(
          "%s needs different placement on partitions %s and %s: " ..
          "submit to one of them", label, chosen.partition, names[i]))
      end
    end
  end
  if chosen == nil then
    return { action = "accept", unchanged = true, tp = tp,
      message = format("%s: no topology facts for partition '%s', job left as is",
        label, table.concat(names, ","))}
  end
  chosen.source = source
  chosen.message = describe(chosen)
  return chosen
end

-- The site default --tp-size of the request's (first known) partition, or nil.
local function default_tp(req)
  local names = partition_names(req.partition)
  for i = 1, #names do
    local part = M.FACTS.partitions[names[i]]
    if part ~= nil then
      return part.default_tp
    end
  end
  return nil
end

-- decide(req) -> decision table.
-- req: tp, pp (raw user values or nil), partition (string or nil), gpus (per node or nil), nodes
-- (count or nil), nodes_range (bool), segment, switches, wait (user's own, or nil).
-- Decision: action = "accept" | "reject"; on reject: code (ESLURM_* name) and message; on
-- accept: tp, gpus_per_node, group_nodes; with pp: pp, replica_nodes (the fewest nodes that
-- hold whole replicas) and unit ("replica" | "group": what stays in one block / leaf);
-- segment / switches + wait when placement is needed, source ("user" | "default"), message;
-- unchanged = true when the job is left as is.
function M.decide(req)
  if req.tp ~= nil or req.pp ~= nil then
    local d = decide_tp(req.tp, req.pp, req, "user")
    d.source = "user"
    return d
  end
  local tp = default_tp(req)
  if tp == nil then
    return { action = "accept", unchanged = true, message = "no --tp-size: job left as is" }
  end
  local d = decide_tp(tp, nil, req, "default")
  d.source = "default"
  if d.action == "reject" then
    -- A site default is a hint, never a reason to refuse a job that did not ask for it.
    return { action = "accept", unchanged = true, source = "default",
      message = "site default --tp-size not applied: " .. d.message }
  end
  return d
end

-- What the controller records about its decision ("topograph:tp=16,gpn=4,group=4,segment=4";
-- with --pp-size "topograph:tp=8,gpn=4,group=2,pp=2,replica=4,unit=replica,segment=4": the
-- fields of a tp-only record come first, so a reader of the older records still parses it).
function M.record(d)
  if d.action ~= "accept" or d.unchanged or d.tp == nil then
    return nil
  end
  local rec = format("topograph:tp=%d,gpn=%d,group=%d", d.tp, d.gpus_per_node, d.group_nodes)
  if d.pp ~= nil then
    rec = rec .. format(",pp=%d,replica=%d", d.pp, d.replica_nodes)
    if d.unit ~= nil then
      rec = rec .. ",unit=" .. d.unit
    end
  end
  if d.segment ~= nil then
    rec = rec .. format(",segment=%d", d.segment)
  end
  if d.switches ~= nil then
    rec = rec .. format(",switches=%d@%d", d.switches, d.wait)
  end
  return rec .. ",src=" .. (d.source or "user")
end

-- Merge a record into an existing comment-like string, replacing an older topograph record.
function M.merge_record(existing, rec)
  if type(existing) ~= "string" or existing == "" then
    return rec
  end
  local kept = string.gsub(existing, "%s*topograph:[^%s]*", "")
  kept = string.gsub(kept, "^%s+", "")
  if kept == "" then
    return rec
  end
  return kept .. " " .. rec
end

-- ---------------------------------------------------------------------------------------
-- Adapters: read a request from Slurm's tables, apply a decision. `slurm` is passed in (not
-- read as a global) so a site's own script, and the tests, control it.
-- ---------------------------------------------------------------------------------------

local NO_VAL = 4294967294 -- job_desc uint32 fields at or above this are "not set"
local NO_VAL16 = 65534 -- same for uint16 fields (segment_size)

-- A set numeric job_desc field as a whole number, or nil.
local function job_number(v, limit)
  if type(v) ~= "number" or v < 1 or v >= limit or v ~= floor(v) then
    return nil
  end
  return floor(v)
end

-- The --tp-size and --pp-size values the SPANK plugin left in spank_job_env (nil when not
-- given). That table is indexed from 0 (ipairs would miss the first entry), entries are
-- "_SLURM_SPANK_OPTION_<plugin>_tp_size=N" and "..._pp_size=N".
function M.spank_sizes(job_desc)
  local env = job_desc.spank_job_env
  if type(env) ~= "table" then
    return nil, nil
  end
  local size = job_number(job_desc.spank_job_env_size, NO_VAL) or 0
  local prefix = "_SLURM_SPANK_OPTION_" .. M.FACTS.plugin .. "_"
  local plen = string.len(prefix)
  local found = {}
  for i = 0, size - 1 do
    local entry = env[i]
    if type(entry) == "string" and string.sub(entry, 1, plen) == prefix then
      local name, value = string.match(string.sub(entry, plen + 1), "^([tp]p_size)=(.*)$")
      if name ~= nil then
        found[name] = value
      end
    end
  end
  return found.tp_size, found.pp_size
end

-- The request as decide() wants it, from a job_desc (controller side). Never reads
-- job_desc.assoc_qos (it crashes slurmctld 24.11 for users without an association).
function M.request_from_job_desc(job_desc, tp, pp)
  local req = { tp = tp, pp = pp }
  if type(job_desc.partition) == "string" then
    req.partition = job_desc.partition
  end
  req.gpus = M.gpus_from_tres(job_desc.tres_per_node)
  local min_n = job_number(job_desc.min_nodes, NO_VAL)
  local max_n = job_number(job_desc.max_nodes, NO_VAL)
  if min_n ~= nil and max_n ~= nil and max_n ~= min_n then
    req.nodes_range = true
  else
    req.nodes = min_n
  end
  if M.FACTS.can_set_segment_size then
    req.segment = job_number(job_desc.segment_size, NO_VAL16)
  end
  req.switches = job_number(job_desc.req_switch, NO_VAL)
  if req.switches ~= nil then
    req.wait = job_number(job_desc.wait4switch, NO_VAL)
  end
  return req
end

local function code_of(slurm, name)
  local code = slurm[name]
  if type(code) == "number" then
    return code
  end
  return slurm.ERROR
end

local function uid_text(uid)
  if type(uid) == "number" and uid == floor(uid) and uid >= 0 and uid < NO_VAL then
    return fmt_int(uid)
  end
  return "?"
end

-- Write a decision into job_desc: segment_size (25.11.2+ only), req_switch/wait4switch, and a
-- record in admin_comment (never the user's comment). Never assigns nil.
function M.apply_to_job_desc(job_desc, d)
  if d.segment ~= nil and not d.user_segment and M.FACTS.can_set_segment_size then
    job_desc.segment_size = d.segment
  end
  if d.switches ~= nil and not d.user_switches then
    job_desc.req_switch = d.switches
    job_desc.wait4switch = d.wait
  end
  local rec = M.record(d)
  if rec ~= nil then
    job_desc.admin_comment = M.merge_record(job_desc.admin_comment, rec)
  end
end

-- What an entry point returns after pcall(ok, rc) of its unsafe body: rc when it is a return
-- code, else SUCCESS with the fault logged as "topograph <what><error>" (the entry points never
-- raise; each says below why SUCCESS is the safe answer for it).
local function guarded(slurm, what, ok, rc)
  if ok and type(rc) == "number" then
    return rc
  end
  pcall(slurm.log_error, "%s", "topograph " .. what .. tostring(rc))
  return slurm.SUCCESS or 0
end

local function job_submit_unsafe(slurm, job_desc, submit_uid)
  local tp, pp = M.spank_sizes(job_desc)
  if tp == nil and pp == nil and not M.ANY_DEFAULT_TP then
    return slurm.SUCCESS -- no hint, no site default: not even read
  end
  local req = M.request_from_job_desc(job_desc, tp, pp)
  local d = M.decide(req)
  if d.action == "reject" then
    slurm.log_user("%s", d.message)
    slurm.log_info("%s", "topograph: rejected a job of uid " .. uid_text(submit_uid) .. ": "
      .. d.message)
    return code_of(slurm, d.code)
  end
  -- Accepted decisions go to the log at verbose level only: the job's AdminComment already
  -- records them, and one info line per job was most of the script's cost in slurmctld
  -- (benchmarks/bench_filter_slurmctld.py measures it).
  if d.unchanged then
    if req.tp ~= nil or req.pp ~= nil then
      slurm.log_info("%s", "topograph: " .. d.message) -- a hint for a partition without facts
    elseif d.source ~= nil then
      slurm.log_verbose("%s", "topograph: " .. d.message)
    end
    return slurm.SUCCESS
  end
  M.apply_to_job_desc(job_desc, d)
  slurm.log_verbose("%s", "topograph: job of uid " .. uid_text(submit_uid) .. ": " .. d.message)
  return slurm.SUCCESS
end

-- job_submit entry point for slurm_job_submit(). Never raises: up to 25.11 a Lua error would
-- accept the job silently, on 26.05 it rejects it; an internal fault keeps the job as
-- submitted and is logged.
function M.job_submit(slurm, job_desc, submit_uid)
  return guarded(slurm, "job_submit: internal error, job kept as submitted: ",
    pcall(job_submit_unsafe, slurm, job_desc, submit_uid))
end

-- The decision record of a job (see M.record), or nil when the job has none: tp, group, and
-- for a --pp-size record pp, replica and unit (records written before --pp-size have none).
function M.parse_record(text)
  if type(text) ~= "string" then
    return nil
  end
  local rec = string.match(text, "topograph:(%S*)")
  if rec == nil then
    return nil
  end
  local tp, group = string.match(rec, "^tp=(%d+),gpn=%d+,group=(%d+)")
  if group == nil then
    return nil
  end
  local out = { tp = tonumber(tp), group = tonumber(group) }
  local pp, replica = string.match(rec, ",pp=(%d+),replica=(%d+)")
  if replica ~= nil then
    out.pp, out.replica = tonumber(pp), tonumber(replica)
    out.unit = string.match(rec, ",unit=(%a+)")
  end
  return out
end

-- A change to a job placed for --tp-size / --pp-size (scontrol update NumNodes=... or
-- SegmentSize=...): the job must stay a whole number of TP groups (model replicas with
-- --pp-size), and its segments hold what they held at submission. Jobs without a record are
-- not looked at; an admin lifts the check by clearing the job's AdminComment.
local function job_modify_unsafe(slurm, job_desc, job_rec, modify_uid)
  local rec = M.parse_record(job_rec.admin_comment)
  if rec == nil then
    return slurm.SUCCESS
  end
  local k, kept, what = rec.group, rec.group, "TP group"
  if rec.replica ~= nil then
    k, what = rec.replica, "model replica unit"
    if rec.unit == "replica" then
      kept = rec.replica
    end
  end
  if k < 2 then
    return slurm.SUCCESS
  end
  local message = nil
  local n = job_number(job_desc.min_nodes, NO_VAL)
  local s = M.FACTS.can_set_segment_size and job_number(job_desc.segment_size, NO_VAL16) or nil
  if n ~= nil and n % k ~= 0 then
    message = format("NumNodes=%d is not a multiple of %d: use %s", n, k,
      node_choices(n, k, "NumNodes="))
  elseif s ~= nil and kept > 1 and s % kept ~= 0 then
    message = format("SegmentSize=%d would split them: use SegmentSize=%d", s, kept)
  end
  if message == nil then
    return slurm.SUCCESS
  end
  local sizes = format("--tp-size=%d", rec.tp)
  if rec.pp ~= nil then
    sizes = format("%s --pp-size=%d", sizes, rec.pp)
  end
  message = format("this job was submitted with %s (%d nodes per %s); ", sizes, k, what)
    .. message
  slurm.log_user("%s", message)
  slurm.log_info("%s", "topograph: refused a change by uid " .. uid_text(modify_uid) .. ": "
    .. message)
  return code_of(slurm, "ESLURM_INVALID_NODE_COUNT")
end

-- job_submit entry point for slurm_job_modify(). Never raises; an internal fault lets the
-- change through and is logged.
function M.job_modify(slurm, job_desc, job_rec, modify_uid)
  return guarded(slurm, "job_modify: internal error, change let through: ",
    pcall(job_modify_unsafe, slurm, job_desc, job_rec, modify_uid))
end

-- A cli_filter option value, or nil for the unset sentinels ("unset", "", nil).
local function option(options, name)
  local v = options[name]
  if v == nil or v == "" or v == "unset" then
    return nil
  end
  return v
end

-- The request from cli_filter options (client side).
function M.request_from_options(options)
  local req = {}
  local spank = options.spank
  if type(spank) == "table" and type(spank[M.FACTS.plugin]) == "table" then
    local plugin = spank[M.FACTS.plugin]
    for key, name in pairs({ tp = "tp-size", pp = "pp-size" }) do
      local v = plugin[name]
      if v ~= nil and v ~= "unset" then
        req[key] = v
      end
    end
  end
  local partition = option(options, "partition")
  if type(partition) == "string" then
    req.partition = partition
  end
  req.gpus = M.gpus_from_count(option(options, "gpus-per-node"))
  if req.gpus == nil then
    req.gpus = M.gpus_from_tres(option(options, "gres"))
  end
  req.nodes, req.nodes_range = M.nodes_from_option(option(options, "nodes"))
  req.segment = M.parse_count(option(options, "segment"))
  local switches = option(options, "switches")
  if type(switches) == "string" then
    local count = string.match(switches, "^%s*(%d+)")
    req.switches = M.parse_count(count)
  end
  return req
end

-- srun inside an existing allocation (a job step; options.jobid is set, "unset" otherwise):
-- the job's placement is already decided. Where the SPANK plugin does not run on the compute
-- nodes, a step also sees the job's own --tp-size, inherited through
-- SLURM_SPANK__SLURM_SPANK_OPTION_* in its environment; filtering it would reject
-- `srun -N 1 ...` inside a `--tp-size=8 -N 4` job (seen on 24.11.5).
function M.is_step(options)
  return options.type == "srun" and option(options, "jobid") ~= nil
end

local function cli_pre_submit_unsafe(slurm, options)
  if M.is_step(options) then
    return slurm.SUCCESS
  end
  local req = M.request_from_options(options)
  local d = M.decide(req)
  if d.action == "reject" then
    slurm.log_error("%s", d.message)
    return slurm.ERROR
  end
  if not d.unchanged then
    if d.segment ~= nil and not d.user_segment then
      options["segment"] = fmt_int(d.segment)
    end
    if d.switches ~= nil and not d.user_switches then
      options["switches"] = fmt_int(d.switches) .. "@" .. M.fmt_wait(d.wait)
    end
  end
  local verbose = M.parse_count(options.verbose)
  if verbose ~= nil and (req.tp ~= nil or req.pp ~= nil or d.source ~= nil) then
    slurm.log_info("%s", "topograph: " .. d.message)
  end
  return slurm.SUCCESS
end

-- cli_filter entry point for slurm_cli_pre_submit(). Fails open (the controller re-checks):
-- an internal fault leaves the options alone and is reported.
function M.cli_pre_submit(slurm, options, offset) -- luacheck: no unused args
  return guarded(slurm, "cli_filter: internal error, options left as given: ",
    pcall(cli_pre_submit_unsafe, slurm, options))
end

return M
