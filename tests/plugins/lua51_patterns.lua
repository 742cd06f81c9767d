--[[
Lua 5.1's pattern matcher (lstrlib.c: match, max_expand, min_expand, classEnd,
singlematch, matchbalance, captures; str_find_aux, gmatch, gsub), ported step for step to
Lua, for tests/plugins/test_hostile_sizes.py.

Why: a count hook (debug.sethook(f, "", n)) counts Lua VM instructions, and the built-in
string.find/match/gmatch/gsub are C functions: a match that backtracks for 38 s is one
instruction to the hook. With these functions in place of the built-ins, every step of
the matcher (each byte a repetition tries, each backtrack) runs as Lua instructions, so
the count is a deterministic measure of the matching work, backtracking included. Same
algorithm, same order of tries, same results as the C code (the test compares them);
plain finds are a loop too. Not ported: error texts (any error will do), and locales
(the C locale's classes, as slurmctld runs).

Returns { find =, match =, gmatch =, gsub = }.
]]
local byte, sub, concat = string.byte, string.sub, table.concat
local tostring, type, error, unpack = tostring, type, error, unpack or table.unpack

local L_ESC = 37 -- %
local CAP_UNFINISHED, CAP_POSITION = -1, -2
local MAXCAPTURES = 32

-- C-locale character classes (match_class)
local function match_class(c, cl)
  local lower = cl
  if cl >= 65 and cl <= 90 then lower = cl + 32 end
  local res
  if lower == 97 then res = (c >= 65 and c <= 90) or (c >= 97 and c <= 122) -- a
  elseif lower == 99 then res = c < 32 or c == 127 -- c
  elseif lower == 100 then res = c >= 48 and c <= 57 -- d
  elseif lower == 108 then res = c >= 97 and c <= 122 -- l
  elseif lower == 112 then -- p
    res = (c >= 33 and c <= 47) or (c >= 58 and c <= 64) or (c >= 91 and c <= 96)
      or (c >= 123 and c <= 126)
  elseif lower == 115 then res = c == 32 or (c >= 9 and c <= 13) -- s
  elseif lower == 117 then res = c >= 65 and c <= 90 -- u
  elseif lower == 119 then -- w
    res = (c >= 48 and c <= 57) or (c >= 65 and c <= 90) or (c >= 97 and c <= 122)
  elseif lower == 120 then -- x
    res = (c >= 48 and c <= 57) or (c >= 65 and c <= 70) or (c >= 97 and c <= 102)
  elseif lower == 122 then res = c == 0 -- z
  else return cl == c end
  if cl >= 97 and cl <= 122 then return res end
  return not res
end

-- ms: { src, src_end (one past the last byte), pat, plen, level, init = {}, len = {} }
local function sb(ms, i) return byte(ms.src, i) or 0 end -- the C string's NUL past the end
local function pb(ms, i)
  if i > ms.plen then return 0 end
  return byte(ms.pat, i)
end

local function class_end(ms, p)
  local c = pb(ms, p)
  p = p + 1
  if c == L_ESC then
    if p > ms.plen then error("malformed pattern (ends with '%')") end
    return p + 1
  elseif c == 91 then -- [
    if pb(ms, p) == 94 then p = p + 1 end
    repeat -- look for a ']'
      if p > ms.plen then error("malformed pattern (missing ']')") end
      local cc = pb(ms, p)
      p = p + 1
      if cc == L_ESC and p <= ms.plen then p = p + 1 end -- skip escapes (e.g. '%]')
    until pb(ms, p) == 93
    return p + 1
  end
  return p
end

-- p at '[', ec at its ']'
local function match_bracket_class(ms, c, p, ec)
  local sig = true
  if pb(ms, p + 1) == 94 then
    sig = false
    p = p + 1
  end
  p = p + 1
  while p < ec do
    local pc = pb(ms, p)
    if pc == L_ESC then
      p = p + 1
      if match_class(c, pb(ms, p)) then return sig end
    elseif pb(ms, p + 1) == 45 and p + 2 < ec then
      p = p + 2
      if pc <= c and c <= pb(ms, p) then return sig end
    elseif pc == c then
      return sig
    end
    p = p + 1
  end
  return not sig
end

local function single_match(ms, c, p, ep)
  local pc = pb(ms, p)
  if pc == 46 then return true -- .
  elseif pc == L_ESC then return match_class(c, pb(ms, p + 1))
  elseif pc == 91 then return match_bracket_class(ms, c, p, ep - 1)
  end
  return pc == c
end

local do_match

local function match_balance(ms, s, p)
  if p + 1 > ms.plen then error("unbalanced pattern") end
  if sb(ms, s) ~= pb(ms, p) then return nil end
  local b, e, cont = pb(ms, p), pb(ms, p + 1), 1
  s = s + 1
  while s < ms.src_end do
    local c = sb(ms, s)
    if c == e then
      cont = cont - 1
      if cont == 0 then return s + 1 end
    elseif c == b then
      cont = cont + 1
    end
    s = s + 1
  end
  return nil
end

local function max_expand(ms, s, p, ep)
  local i = 0
  while s + i < ms.src_end and single_match(ms, sb(ms, s + i), p, ep) do i = i + 1 end
  while i >= 0 do -- keep trying with the most repetitions, then one fewer
    local res = do_match(ms, s + i, ep + 1)
    if res then return res end
    i = i - 1
  end
  return nil
end

local function min_expand(ms, s, p, ep)
  while true do
    local res = do_match(ms, s, ep + 1)
    if res then
      return res
    elseif s < ms.src_end and single_match(ms, sb(ms, s), p, ep) then
      s = s + 1
    else
      return nil
    end
  end
end

local function start_capture(ms, s, p, what)
  local level = ms.level
  if level >= MAXCAPTURES then error("too many captures") end
  ms.init[level + 1], ms.len[level + 1] = s, what
  ms.level = level + 1
  local res = do_match(ms, s, p)
  if res == nil then ms.level = ms.level - 1 end
  return res
end

local function end_capture(ms, s, p)
  local l
  for level = ms.level, 1, -1 do
    if ms.len[level] == CAP_UNFINISHED then l = level break end
  end
  if l == nil then error("invalid pattern capture") end
  ms.len[l] = s - ms.init[l]
  local res = do_match(ms, s, p)
  if res == nil then ms.len[l] = CAP_UNFINISHED end
  return res
end

local function match_capture(ms, s, c)
  local l = c - 48 -- '1' -> 1
  if l < 1 or l > ms.level or ms.len[l] == CAP_UNFINISHED then
    error("invalid capture index")
  end
  local len = ms.len[l]
  if ms.src_end - s >= len
    and sub(ms.src, ms.init[l], ms.init[l] + len - 1) == sub(ms.src, s, s + len - 1) then
    return s + len
  end
  return nil
end

do_match = function(ms, s, p)
  while true do
    if p > ms.plen then return s end -- end of pattern
    local pc = pb(ms, p)
    local dflt = false
    if pc == 40 then -- (
      if pb(ms, p + 1) == 41 then return start_capture(ms, s, p + 2, CAP_POSITION) end
      return start_capture(ms, s, p + 1, CAP_UNFINISHED)
    elseif pc == 41 then -- )
      return end_capture(ms, s, p + 1)
    elseif pc == L_ESC then
      local nc = pb(ms, p + 1)
      if nc == 98 then -- %b
        s = match_balance(ms, s, p + 2)
        if s == nil then return nil end
        p = p + 4
      elseif nc == 102 then -- %f
        p = p + 2
        if pb(ms, p) ~= 91 then error("missing '[' after '%f' in pattern") end
        local ep = class_end(ms, p)
        local prev = (s == 1) and 0 or sb(ms, s - 1)
        if match_bracket_class(ms, prev, p, ep - 1)
          or not match_bracket_class(ms, sb(ms, s), p, ep - 1) then
          return nil
        end
        p = ep
      elseif nc >= 48 and nc <= 57 then -- %0-%9: a capture's text again
        s = match_capture(ms, s, nc)
        if s == nil then return nil end
        p = p + 2
      else
        dflt = true
      end
    elseif pc == 0 then -- an embedded NUL ends a C pattern
      return s
    elseif pc == 36 and p + 1 > ms.plen then -- $ at the end of the pattern
      if s == ms.src_end then return s end
      return nil
    else
      dflt = true
    end
    if dflt then
      local ep = class_end(ms, p)
      local m = s < ms.src_end and single_match(ms, sb(ms, s), p, ep)
      local epc = pb(ms, ep)
      if epc == 63 then -- ?
        if m then
          local res = do_match(ms, s + 1, ep + 1)
          if res then return res end
        end
        p = ep + 1
      elseif epc == 42 then -- *
        return max_expand(ms, s, p, ep)
      elseif epc == 43 then -- +
        if m then return max_expand(ms, s + 1, p, ep) end
        return nil
      elseif epc == 45 then -- -
        return min_expand(ms, s, p, ep)
      else
        if not m then return nil end
        s = s + 1
        p = ep
      end
    end
  end
end

local function state(s, pat)
  return { src = s, src_end = #s + 1, pat = pat, plen = #pat, level = 0, init = {}, len = {} }
end

local function one_capture(ms, i, s, e)
  if i > ms.level then
    if i == 1 then return sub(ms.src, s, e - 1) end -- the whole match
    error("invalid capture index")
  end
  local l = ms.len[i]
  if l == CAP_UNFINISHED then error("unfinished capture") end
  if l == CAP_POSITION then return ms.init[i] end
  return sub(ms.src, ms.init[i], ms.init[i] + l - 1)
end

local function captures(ms, s, e)
  local n = (ms.level == 0 and s) and 1 or ms.level
  local out = {}
  for i = 1, n do out[i] = one_capture(ms, i, s, e) end
  return out, n
end

local function checkstring(v, what)
  local t = type(v)
  if t == "number" then return tostring(v) end
  if t ~= "string" then error("bad argument (" .. what .. ": string expected, got " .. t .. ")") end
  return v
end

local SPECIALS = { [94] = 1, [36] = 1, [42] = 1, [43] = 1, [63] = 1, [46] = 1, [40] = 1,
  [91] = 1, [37] = 1, [45] = 1 } -- ^$*+?.([%-

local function has_specials(p)
  for i = 1, #p do
    local c = byte(p, i)
    if c == 0 then return false end -- strpbrk stops at the C string's end
    if SPECIALS[c] then return true end
  end
  return false
end

local function find_aux(find, s, p, init, plain)
  s, p = checkstring(s, "string"), checkstring(p, "pattern")
  local l1 = #s
  init = init or 1
  if init < 0 then init = l1 + init + 1 end -- posrelat
  if init < 0 then init = 0 end
  init = init - 1
  if init < 0 then init = 0 elseif init > l1 then init = l1 end
  if find and (plain or not has_specials(p)) then -- plain search (lmemfind)
    local l2 = #p
    if l2 == 0 then return init + 1, init end
    local first = byte(p, 1)
    for i = init + 1, l1 - l2 + 1 do
      if byte(s, i) == first and sub(s, i, i + l2 - 1) == p then return i, i + l2 - 1 end
    end
    return nil
  end
  local anchor = byte(p, 1) == 94
  local ms = state(s, anchor and sub(p, 2) or p)
  local s1 = init + 1
  repeat
    ms.level = 0
    local e = do_match(ms, s1, 1)
    if e then
      if find then
        local caps, n = captures(ms, nil, 0)
        return s1, e - 1, unpack(caps, 1, n)
      end
      local caps, n = captures(ms, s1, e)
      return unpack(caps, 1, n)
    end
    s1 = s1 + 1
  until s1 > ms.src_end or anchor
  return nil
end

local P = {}

function P.find(s, p, init, plain) return find_aux(true, s, p, init, plain) end

function P.match(s, p, init) return find_aux(false, s, p, init) end

function P.gmatch(s, p)
  s, p = checkstring(s, "string"), checkstring(p, "pattern")
  local ms, start = state(s, p), 1
  return function()
    local src = start
    while src <= ms.src_end do
      ms.level = 0
      local e = do_match(ms, src, 1)
      if e then
        start = (e == src) and e + 1 or e -- an empty match goes on one byte further
        local caps, n = captures(ms, src, e)
        return unpack(caps, 1, n)
      end
      src = src + 1
    end
    return nil
  end
end

local function add_value(ms, b, s, e, repl)
  local t = type(repl)
  local v
  if t == "string" or t == "number" then
    repl = tostring(repl)
    local i, l = 1, #repl
    while i <= l do
      local c = byte(repl, i)
      if c ~= L_ESC then
        b[#b + 1] = sub(repl, i, i)
      else
        i = i + 1
        local d = byte(repl, i) or 0
        if d < 48 or d > 57 then
          b[#b + 1] = sub(repl, i, i)
        elseif d == 48 then
          b[#b + 1] = sub(ms.src, s, e - 1)
        else
          b[#b + 1] = tostring(one_capture(ms, d - 48, s, e))
        end
      end
      i = i + 1
    end
    return
  elseif t == "function" then
    local caps, n = captures(ms, s, e)
    v = repl(unpack(caps, 1, n))
  else -- table
    v = repl[one_capture(ms, 1, s, e)]
  end
  if not v then
    v = sub(ms.src, s, e - 1) -- nil or false: keep the original text
  elseif type(v) ~= "string" and type(v) ~= "number" then
    error("invalid replacement value (a " .. type(v) .. ")")
  end
  b[#b + 1] = tostring(v)
end

function P.gsub(s, p, repl, max_n)
  s, p = checkstring(s, "string"), checkstring(p, "pattern")
  local t = type(repl)
  if t ~= "string" and t ~= "number" and t ~= "function" and t ~= "table" then
    error("bad argument #3 to 'gsub' (string/function/table expected)")
  end
  local anchor = byte(p, 1) == 94
  local ms = state(s, anchor and sub(p, 2) or p)
  local max_s = max_n or #s + 1
  local src, n, b = 1, 0, {}
  while n < max_s do
    ms.level = 0
    local e = do_match(ms, src, 1)
    if e then
      n = n + 1
      add_value(ms, b, src, e, repl)
    end
    if e and e > src then
      src = e -- a non-empty match: go on after it
    elseif src < ms.src_end then
      b[#b + 1] = sub(s, src, src)
      src = src + 1
    else
      break
    end
    if anchor then break end
  end
  b[#b + 1] = sub(s, src, ms.src_end - 1)
  return concat(b), n
end

return P
