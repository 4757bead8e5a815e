#!/usr/bin/env python3
# The console's searches on a million rows, on MariaDB and SQLite: console-plans.sh does this for
# PostgreSQL. Fills each engine with 1,000,000 store-then-process rows, 1,000,000 dead letters,
# 1,000,000 outbox rows and 100,000 audit records, and runs each list statement the console runs
# (the files themselves, from crates/inboxed-mysql/sql and crates/inboxed-sqlite/sql) as the
# library does: prepared, the arguments bound, never written into the text. Fails when one reads
# past its window (100,000 ids and the 100 listed) or scans a table whole.
#
#   python3 scripts/console-plans-engines.py [rows]      (default 1000000; Python 3.11, stdlib)
#   MYSQL_URL=mysql://user:password@host:port  (default mysql://root@localhost:3306)
#   INBOXED=target/debug/inboxed  ENGINES=mariadb,sqlite  MYSQL_SQL_DIR=…  SQLITE_SQL_DIR=…
#
# Each engine is filled twice: a tenth of the rows first, measured, then the rest, measured
# again. A bounded search does no more at the full size than at a tenth (its window holds the
# whole small table), so one that does several times more (x3) grows with the table even when it
# stays under the window at this size: a consumer's rows read through its index are 100,000 of
# a million, exactly the window, but a million of ten. Growth fails a statement once it reads
# more than a tenth of the window; a rare value read through an index (the dead rows, 1 in 1000)
# grows with the table as PostgreSQL's partial-index reads do, and passes there too. At fewer
# than ten windows of rows the comparison allows what a growing window explains, and means
# little.
#
# MariaDB, through the `mariadb` client (FLUSH STATUS needs the RELOAD privilege), one session
# per statement, set as sqlx sets its connections: PREPARE of the text with `?` (each `$n` a `?`
# bound with argument n, as crates/inboxed-mysql/src/script.rs rewrites it), EXECUTE … USING
# user variables, once to warm the buffer pool and once measured between FLUSH STATUS and SHOW
# SESSION STATUS. Rows read are the sum of the Handler_read_ counters that each fetch a row
# from a table: _key (the first row of each index lookup), _next and _prev (each further row
# of an index range, either way), _first and _last (the start of an index scan, or a MIN/MAX),
# _rnd_next (each row of a table scan, internal temporary tables included) and _rnd (a row
# fetched again by position after a sort); _retry and _rnd_deleted count no new row. MariaDB
# optimizes a prepared statement at each EXECUTE with its arguments' values (it has no generic
# plan), so `$1 IS NULL OR …` folds away there as a literal would: the plan shown is the
# prepared statement's own, ANALYZE FORMAT=JSON prepared with `?` and executed with the same
# variables. A table read with access ALL is read whole.
#
# SQLite, through Python's sqlite3, the arguments bound to `?1`, `?2` …: EXPLAIN QUERY PLAN
# with them bound, and the work counted in virtual-machine instructions (a progress handler),
# exact where a time is not: on two busy cores a 20 ms statement can take 60, so growth is
# judged on instructions and the times (the best of three) are only reported. A SCAN of an
# inboxed_ table reads it whole unless it goes through a partial index, or lists the rows in
# the order it reads them under a LIMIT (and stops there, as PostgreSQL's backward scan of a
# primary key does; the growth check judges how far). Python's SQLite is the system's, not the
# one libsqlite3-sys bundles into the library (a newer one, with STAT4); to run that one, build
# its sqlite3.c into a libsqlite3.so.0 and put its directory in LD_LIBRARY_PATH.
#
# The database `console_plans` (MariaDB) is dropped at the start and at the end; SQLite's file
# lives in a temporary directory, removed at the end.
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
SMALL = max(ROWS // 10, 1)
WINDOW = 100_000
LIMIT = 100
INBOXED = os.environ.get("INBOXED", os.path.join(HERE, "target/debug/inboxed"))
ENGINES = os.environ.get("ENGINES", "mariadb,sqlite").split(",")
DB = "console_plans"
URL = urllib.parse.urlsplit(os.environ.get("MYSQL_URL", "mysql://root@localhost:3306"))
NOW_MS = int(time.time() * 1000)
# Growth counts once a statement reads this many rows (MariaDB); on SQLite, once it costs this
# share of what the search through the whole window costs ("rows: matching nothing").
GROWTH_FLOOR = WINDOW // 10
GROWTH_MAX = 3.0
STEP = 100  # SQLite's progress handler runs every this many instructions

W = WINDOW
N = None
NOTHING = b"nothing"
PATH = '["order","cents"]'
# name, file, arguments in the order of their numbers ($1 / ?1 …)
STATEMENTS = [
    ("rows: one consumer, any status", "rows_list",
     ["consumer-3", N, N, N, N, N, N, LIMIT, W, N, N]),
    ("rows: dead (1 in 1000)", "rows_list", [N, "dead", N, N, N, N, N, LIMIT, W, N, N]),
    ("rows: matching nothing", "rows_list", ["nobody", N, N, N, N, N, N, LIMIT, W, N, N]),
    ("rows: payload contains, nothing", "rows_list",
     [N, N, N, N, N, N, NOTHING, LIMIT, W, N, N]),
    ("rows: json path, 1 in 997", "rows_list",
     ["consumer-1", N, N, N, N, N, N, LIMIT, W, PATH, "5"]),
    ("rows: an aggregate", "rows_list",
     ["consumer-1", N, "acct-11", N, N, N, N, LIMIT, W, N, N]),
    ("rows: a consumer's message id", "rows_by_key",
     ["consumer-1", N, N, "m-11", N, N, N, LIMIT, N, N]),
    ("letters: newest failures", "list_dead_letters",
     [N, N, N, N, LIMIT, N, N, W, N, N, N]),
    ("letters: a reason (1 in 100)", "list_dead_letters",
     [N, "conflict", N, N, LIMIT, N, N, W, N, N, N]),
    ("letters: error text, nothing", "list_dead_letters",
     [N, N, N, "no such text", LIMIT, N, N, W, N, N, N]),
    ("letters: payload contains, nothing", "list_dead_letters",
     [N, N, N, N, LIMIT, N, N, W, NOTHING, N, N]),
    ("letters: json path, 1 in 1000", "list_dead_letters",
     [N, N, N, N, LIMIT, N, N, W, N, '["n"]', "5000"]),
    ("letters: a message id", "list_dead_letters",
     [N, N, N, N, LIMIT, N, "m-999999", W, N, N, N]),
    ("outbox: newest, any status", "outbox_browse", [N, N, N, N, N, LIMIT, W, N, N]),
    ("outbox: dead (1 in 1000)", "outbox_browse", ["dead", N, N, N, N, LIMIT, W, N, N]),
    ("outbox: a destination, nothing", "outbox_browse",
     [N, "nowhere", N, N, N, LIMIT, W, N, N]),
    ("outbox: payload contains, nothing", "outbox_browse",
     [N, N, N, N, NOTHING, LIMIT, W, N, N]),
    ("outbox: json path, 1 in 997", "outbox_browse",
     [N, "dest-1", N, N, N, LIMIT, W, PATH, "5"]),
    ("outbox: a message id", "outbox_load", [N, "o-999999"]),
    ("outbox: dead of a destination", "outbox_select_dead", [N, N, "dest-3", N]),
    ("audit: newest", "audit_list", [N, LIMIT]),
    ("audit: one consumer", "audit_list", ["consumer-3", LIMIT]),
]


def read_sql(engine_dir, name, schema):
    # MYSQL_SQL_DIR / SQLITE_SQL_DIR: another copy of the files (to try a change to one).
    env = {"inboxed-mysql": "MYSQL_SQL_DIR", "inboxed-sqlite": "SQLITE_SQL_DIR"}[engine_dir]
    folder = os.environ.get(env, os.path.join(HERE, "crates", engine_dir, "sql"))
    with open(os.path.join(folder, name + ".sql")) as f:
        return f.read().replace("{{schema}}", schema).replace("{{prefix}}", "inboxed_")


def mysql_placeholders(sql):
    """script.rs's rewriting: comments dropped, quoted text kept, each `$n` a `?` taking
    argument n; returns the text and the argument numbers in the order of the `?`."""
    out, order, i = [], [], 0
    while i < len(sql):
        c = sql[i]
        if c in "'\"`":
            j = i + 1
            while j < len(sql):
                if sql[j] == "\\" and c != "`":
                    j += 2
                elif sql[j] == c and sql[j + 1:j + 2] == c:
                    j += 2
                elif sql[j] == c:
                    break
                else:
                    j += 1
            out.append(sql[i:j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end
        elif sql.startswith("/*", i):
            i = sql.index("*/", i + 2) + 2
            out.append(" ")
        elif c == "$":
            m = re.match(r"\$([1-9][0-9]*)", sql[i:])
            if not m:
                raise SystemExit(f"bad placeholder at byte {i}")
            order.append(int(m.group(1)))
            out.append("?")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    text = "".join(out).strip()
    if re.search(r";\s*$", text, re.M):
        raise SystemExit("a list statement is expected to be one statement")
    return text, order


def arity(file, takes, args):
    if takes != len(args):
        raise SystemExit(f"{file}.sql takes {takes} arguments, the script gives {len(args)}:"
                         " its parameters changed, update STATEMENTS")


def grows(big, small, floor):
    """Whether a statement does much more at the full size than at a tenth, beyond what a
    window growing with a table smaller than it allows."""
    expected = min(ROWS, WINDOW) / min(SMALL, WINDOW)
    return big > floor and big / max(small, 1) > GROWTH_MAX * expected


def fmt_growth(big, small):
    return "x%.1f" % (big / small) if small else ("x1.0" if not big else "x>%d" % big)


# ---------------------------------------------------------------------------------- MariaDB

def mariadb(script, db=DB, check=True):
    cmd = ["mariadb", "-N", "-B", "-r", "-h", URL.hostname or "localhost",
           "-P", str(URL.port or 3306), "-u", urllib.parse.unquote(URL.username or "root")]
    env = dict(os.environ)
    if URL.password:
        env["MYSQL_PWD"] = urllib.parse.unquote(URL.password)
    if db:
        cmd.append(db)
    r = subprocess.run(cmd, input=script, capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        raise SystemExit("mariadb failed: " + r.stderr.strip())
    return r.stdout


def my_literal(v):
    if v is None:
        return "NULL"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, bytes):  # the library binds bytes as a binary string
        return "X'" + v.hex() + "'"
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def mariadb_fill(lo, hi):
    """Rows lo..hi of the full fill (and their tenth of the audit trail), then ANALYZE."""
    a_lo, a_hi = (lo - 1) // 10 + 1, hi // 10
    audit = f"""
INSERT INTO inboxed_redrive_audit
    (id, at, actor, reason, consumer_name, selector, row_count, done_count, ids, action)
SELECT seq, @now - ({ROWS // 10} - seq) * 10, 'ops', CONCAT('replayed ', seq),
       CONCAT('consumer-', seq % 10), 'all', 1, 0, CONCAT('[', seq, ']'), 'replay'
FROM seq_{a_lo}_to_{a_hi};""" if a_lo <= a_hi else ""
    mariadb(f"""
SET time_zone = '+00:00';
SET @rows = {ROWS}, @now = {NOW_MS};
INSERT INTO inboxed_inbox_messages
    (id, consumer_name, message_id, aggregate_id, payload, payload_hash, status, received_at,
     available_at, attempts, done_at)
SELECT seq, CONCAT('consumer-', seq % 10), CONCAT('m-', seq), CONCAT('acct-', seq % 5000),
       CAST(CONCAT('{{"order":{{"id":', seq, ',"cents":', seq % 997, '}}}}') AS BINARY), X'00',
       CASE WHEN seq % 1000 = 0 THEN 'dead' WHEN seq > @rows - 50 THEN 'pending' ELSE 'done' END,
       @now - (@rows - seq), @now - (@rows - seq), 1,
       CASE WHEN seq % 1000 = 0 OR seq > @rows - 50 THEN NULL ELSE @now END
FROM seq_{lo}_to_{hi};
INSERT INTO inboxed_dead_letters
    (id, consumer_name, message_id, payload, reason, error, attempts, first_failed_at,
     last_failed_at)
SELECT seq, CONCAT('consumer-', seq % 10), CONCAT('m-', seq),
       CAST(CONCAT('{{"n":', seq, '}}') AS BINARY),
       IF(seq % 100 = 0, 'conflict', 'permanent'), CONCAT('refused: amount ', seq), 1,
       FROM_UNIXTIME(@now / 1000) - INTERVAL seq SECOND,
       FROM_UNIXTIME(@now / 1000) - INTERVAL (@rows - seq) SECOND
FROM seq_{lo}_to_{hi};
INSERT INTO inboxed_outbox_messages
    (id, message_id, destination, ordering_key, headers, payload, status, created_at,
     available_at, attempts, sent_at, last_error)
SELECT seq, CONCAT('o-', seq), CONCAT('dest-', seq % 10),
       IF(seq % 7 = 0, CONCAT('acct-', seq % 5000), NULL), '{{}}',
       CAST(CONCAT('{{"order":{{"id":', seq, ',"cents":', seq % 997, '}}}}') AS BINARY),
       CASE WHEN seq % 1000 = 0 THEN 'dead' WHEN seq > @rows - 50 THEN 'pending' ELSE 'sent' END,
       @now - (@rows - seq), @now - (@rows - seq), 1,
       CASE WHEN seq % 1000 = 0 OR seq > @rows - 50 THEN NULL ELSE @now END,
       IF(seq % 1000 = 0, 'NOT_ROUTED', NULL)
FROM seq_{lo}_to_{hi};
{audit}
ANALYZE TABLE inboxed_inbox_messages, inboxed_dead_letters, inboxed_outbox_messages,
              inboxed_redrive_audit;
""")


def my_tables(plan):
    """(table, access, key, rows read) of each table an ANALYZE FORMAT=JSON plan read."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            t = node.get("table")
            if isinstance(t, dict) and "table_name" in t:
                rows = t.get("r_rows")
                if rows is not None:
                    found.append((t["table_name"], t.get("access_type"),
                                  t.get("key"), round(rows * (t.get("r_loops") or 1))))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(plan)
    return found


def mariadb_measure(file, args):
    sql, order = mysql_placeholders(read_sql("inboxed-mysql", file, f"`{DB}`"))
    arity(file, max(order), args)
    quoted = sql.replace("\\", "\\\\").replace("'", "\\'")
    sets = "SET " + ", ".join(f"@a{n} = {my_literal(v)}" for n, v in enumerate(args, 1)) + ";"
    using = ", ".join(f"@a{n}" for n in order)
    locks = "FOR UPDATE" in sql.upper()
    # The session as sqlx opens it, and as the store sets it (time_zone).
    out = mariadb(f"""
SET sql_mode = (SELECT CONCAT(@@sql_mode, ',PIPES_AS_CONCAT,NO_ENGINE_SUBSTITUTION')),
    time_zone = '+00:00', NAMES utf8mb4;
{"START TRANSACTION;" if locks else ""}
PREPARE q FROM '{quoted}';
PREPARE a FROM 'ANALYZE FORMAT=JSON {quoted}';
{sets}
EXECUTE q USING {using};
FLUSH STATUS;
SET @t0 = SYSDATE(6);
EXECUTE q USING {using};
SET @t1 = SYSDATE(6);
SELECT '@@status';
SHOW SESSION STATUS LIKE 'Handler_read%';
SELECT '@@time', TIMESTAMPDIFF(MICROSECOND, @t0, @t1);
SELECT '@@analyze';
EXECUTE a USING {using};
SELECT '@@end';
{"ROLLBACK;" if locks else ""}
""")
    lines = out.split("\n")
    s, a, e = lines.index("@@status"), lines.index("@@analyze"), lines.index("@@end")
    status = dict(line.split("\t") for line in lines[s + 1:a] if line.startswith("Handler_"))
    us = next(int(line.split("\t")[1]) for line in lines[s:a] if line.startswith("@@time"))
    counted = ["first", "key", "last", "next", "prev", "rnd", "rnd_next"]
    read = sum(int(status["Handler_read_" + c]) for c in counted)
    text = "\n".join(lines[a + 1:e])
    try:
        plan = json.loads(text)
    except ValueError:
        # MariaDB writes a condition's text unescaped (a JSON path's quotes): quote each
        # one-line string value again.
        plan = json.loads(re.sub(r'^(\s*"[^"]+": )"(.*)"(,?)\s*$',
                                 lambda m: m.group(1) + json.dumps(m.group(2)) + m.group(3),
                                 text, flags=re.M))
    return read, us / 1000, my_tables(plan)


def run_mariadb():
    failed = []
    mariadb(f"DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB}", db=None)
    try:
        user = URL.username or "root"
        auth = user + (":" + URL.password if URL.password else "")
        url = f"mysql://{auth}@{URL.hostname or 'localhost'}:{URL.port or 3306}/{DB}"
        subprocess.run([INBOXED, "migrate", "--database-url", url], check=True,
                       stdout=subprocess.DEVNULL)
        small = {}
        for lo, hi in ((1, SMALL), (SMALL + 1, ROWS)):
            started = time.monotonic()
            mariadb_fill(lo, hi)
            print(f"mariadb: filled rows {lo}..{hi} of each table (and a tenth as audit"
                  f" records) in {time.monotonic() - started:.1f}s", flush=True)
            full = hi == ROWS
            for name, file, args in STATEMENTS:
                read, ms, tables = mariadb_measure(file, args)
                if not full:
                    small[name] = read
                    continue
                plan = "; ".join(f"{t} {acc}{'(' + k + ')' if k else ''}: {r}".replace(
                    "inboxed_", "") for t, acc, k, r in tables)
                growth = fmt_growth(read, small[name])
                print(f"mariadb  {name:<35} {read:>9} rows read {ms:>9.1f} ms  {growth:>6}"
                      f" vs {SMALL} rows  {plan}", flush=True)
                whole = [t.replace("inboxed_", "") for t, acc, _, _ in tables
                         if acc == "ALL" and t.startswith("inboxed_")]
                if read > WINDOW + 1000 or whole or grows(read, small[name], GROWTH_FLOOR):
                    why = ("scans " + ", ".join(whole) + " whole") if whole else \
                        ("grows with the table" if read <= WINDOW + 1000 else "")
                    print(f"  ^ reads past the window{' (' + why + ')' if why else ''}",
                          flush=True)
                    failed.append(("mariadb", name))
    finally:
        mariadb(f"DROP DATABASE IF EXISTS {DB}", db=None, check=False)
    return failed


# ---------------------------------------------------------------------------------- SQLite

def sqlite_fill(conn, lo, hi):
    a_lo, a_hi = (lo - 1) // 10 + 1, hi // 10
    cte = "WITH RECURSIVE g(n) AS (SELECT :lo UNION ALL SELECT n + 1 FROM g WHERE n < :hi) "
    p = {"lo": lo, "hi": hi, "rows": ROWS, "now": NOW_MS}
    conn.execute("BEGIN")
    conn.execute(cte + """
INSERT INTO "main"."inboxed_inbox_messages"
    (id, consumer_name, message_id, aggregate_id, payload, payload_hash, status, received_at,
     available_at, attempts, done_at)
SELECT n, 'consumer-' || (n % 10), 'm-' || n, 'acct-' || (n % 5000),
       CAST('{"order":{"id":' || n || ',"cents":' || (n % 997) || '}}' AS BLOB), x'00',
       CASE WHEN n % 1000 = 0 THEN 'dead' WHEN n > :rows - 50 THEN 'pending' ELSE 'done' END,
       :now - (:rows - n), :now - (:rows - n), 1,
       CASE WHEN n % 1000 = 0 OR n > :rows - 50 THEN NULL ELSE :now END
FROM g""", p)
    conn.execute(cte + """
INSERT INTO "main"."inboxed_dead_letters"
    (id, consumer_name, message_id, payload, reason, error, attempts, first_failed_at,
     last_failed_at)
SELECT n, 'consumer-' || (n % 10), 'm-' || n, CAST('{"n":' || n || '}' AS BLOB),
       CASE WHEN n % 100 = 0 THEN 'conflict' ELSE 'permanent' END, 'refused: amount ' || n, 1,
       strftime('%Y-%m-%dT%H:%M:%fZ', :now / 1000 - n, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%fZ', :now / 1000 - (:rows - n), 'unixepoch')
FROM g""", p)
    conn.execute(cte + """
INSERT INTO "main"."inboxed_outbox_messages"
    (id, message_id, destination, ordering_key, payload, status, created_at, available_at,
     attempts, sent_at, last_error)
SELECT n, 'o-' || n, 'dest-' || (n % 10),
       CASE WHEN n % 7 = 0 THEN 'acct-' || (n % 5000) END,
       CAST('{"order":{"id":' || n || ',"cents":' || (n % 997) || '}}' AS BLOB),
       CASE WHEN n % 1000 = 0 THEN 'dead' WHEN n > :rows - 50 THEN 'pending' ELSE 'sent' END,
       :now - (:rows - n), :now - (:rows - n), 1,
       CASE WHEN n % 1000 = 0 OR n > :rows - 50 THEN NULL ELSE :now END,
       CASE WHEN n % 1000 = 0 THEN 'NOT_ROUTED' END
FROM g""", p)
    if a_lo <= a_hi:
        conn.execute(cte.replace(":lo", ":alo").replace(":hi", ":ahi") + """
INSERT INTO "main"."inboxed_redrive_audit"
    (id, at, actor, reason, consumer_name, selector, row_count, done_count, ids, action)
SELECT n, :now - (:rows / 10 - n) * 10, 'ops', 'replayed ' || n, 'consumer-' || (n % 10),
       'all', 1, 0, '[' || n || ']', 'replay'
FROM g""", {"alo": a_lo, "ahi": a_hi, "rows": ROWS, "now": NOW_MS})
    conn.execute("COMMIT")
    # As the migrations do (0004): a sample of 1,000 rows per index.
    conn.execute("PRAGMA analysis_limit = 1000")
    conn.execute("ANALYZE")


def sqlite_partial_indexes(conn):
    return {name for name, sql in conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        if re.search(r"\bWHERE\b", sql, re.I)}


def sqlite_whole_scans(plan, partial, file):
    """The inboxed_ tables a plan scans whole. A SCAN through a partial index reads that
    index's rows only; a SCAN at the top of the statement in the order it lists (no temporary
    B-tree sorting it), under a LIMIT, stops at the limit, as PostgreSQL's backward index scan
    of the primary key does: the growth check judges how far it goes. Any other SCAN reads the
    table whole."""
    limited = re.search(r"\bLIMIT\b", read_sql("inboxed-sqlite", file, '"main"'))
    sorted_top = any(p == 0 and "TEMP B-TREE FOR ORDER BY" in d for p, d in plan)
    whole = []
    for parent, detail in plan:
        m = re.match(r"SCAN (?:\w+\.)?(inboxed_\w+)(?: USING (?:COVERING )?INDEX (\w+))?", detail)
        if not m or m.group(2) in partial:
            continue
        if parent == 0 and limited and not sorted_top:
            continue
        whole.append(m.group(1).replace("inboxed_", ""))
    return whole


def sqlite_measure(conn, file, args):
    sql = read_sql("inboxed-sqlite", file, '"main"')
    code = re.sub(r"--[^\n]*|'[^']*'", "", sql)
    arity(file, max(int(n) for n in re.findall(r"\?(\d+)", code)), args)
    plan = [(row[1], row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args)]
    steps = [0]

    def tick():
        steps[0] += 1
        return 0
    writes = file == "outbox_select_dead"  # runs in the caller's write transaction
    best = None
    for run in range(3):
        conn.set_progress_handler(tick if run == 0 else None, STEP)
        if writes:
            conn.execute("BEGIN IMMEDIATE")
        started = time.perf_counter()
        conn.execute(sql, args).fetchall()
        ms = (time.perf_counter() - started) * 1000
        if writes:
            conn.execute("ROLLBACK")
        best = ms if best is None else min(best, ms)
    conn.set_progress_handler(None, 0)
    return plan, steps[0] * STEP, best


def run_sqlite():
    failed = []
    tmp = tempfile.mkdtemp(prefix="console-plans-")
    try:
        path = os.path.join(tmp, "console-plans.db")
        subprocess.run([INBOXED, "migrate", "--database-url", "sqlite://" + path], check=True,
                       stdout=subprocess.DEVNULL)
        fill = sqlite3.connect(path, isolation_level=None)
        fill.execute("PRAGMA synchronous = OFF")
        fill.execute("PRAGMA cache_size = -262144")
        print(f"sqlite {sqlite3.sqlite_version} (Python's; the library bundles its own)",
              flush=True)
        partial = sqlite_partial_indexes(fill)
        small = {}
        for lo, hi in ((1, SMALL), (SMALL + 1, ROWS)):
            started = time.monotonic()
            sqlite_fill(fill, lo, hi)
            print(f"sqlite: filled rows {lo}..{hi} of each table (and a tenth as audit"
                  f" records) in {time.monotonic() - started:.1f}s", flush=True)
            # A connection as the library opens one: default cache, nothing else set.
            conn = sqlite3.connect(path, isolation_level=None)
            full = hi == ROWS
            measured = {}
            for name, file, args in STATEMENTS:
                measured[name] = sqlite_measure(conn, file, args)
            conn.close()
            if not full:
                small = measured
                continue
            # What reading the whole window costs here: the floor of the growth check.
            floor = measured["rows: matching nothing"][1] // 10
            for name, file, args in STATEMENTS:
                plan, steps, ms = measured[name]
                _, small_steps, small_ms = small[name]
                growth = fmt_growth(steps, small_steps)
                shown = "; ".join(d.replace("main.", "").replace("inboxed_", "")
                                  for _, d in plan if "inboxed_" in d or "TEMP B-TREE" in d)
                shown_steps = steps if steps else f"<{STEP}"
                print(f"sqlite   {name:<35} {shown_steps:>9} vm steps {ms:>9.1f} ms  {growth:>6}"
                      f" (time {fmt_growth(ms, small_ms)}) vs {SMALL} rows  {shown}",
                      flush=True)
                whole = sqlite_whole_scans(plan, partial, file)
                if whole or grows(steps, small_steps, floor):
                    why = ("scans " + ", ".join(whole) + " whole") if whole else \
                        "grows with the table"
                    print(f"  ^ reads past the window ({why})", flush=True)
                    failed.append(("sqlite", name))
        fill.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return failed


def main():
    started = time.monotonic()
    failed = []
    if "mariadb" in ENGINES:
        failed += run_mariadb()
    if "sqlite" in ENGINES:
        failed += run_sqlite()
    print(f"{len(failed)} failed in {time.monotonic() - started:.0f}s"
          + "".join(f"\n  {e}: {n}" for e, n in failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
