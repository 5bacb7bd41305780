"""Issue 27's kinds where the break-it review of the last stop found them still slipping: a
one-row "hourly" file, a failed count inferred without saying so, one all-failed run refusing a
whole file, times without an offset beside times with one, a given --t0 called assumed, and
telemetry windows (inside a gap, empty, end counted twice ways, a logger that changed its rate).
Each reads the handed case file where there is one."""

from __future__ import annotations

import json

import pytest
from harness import case_file, shared
from test_carbon_hourly import NEW_HEADER, NEW_ROWS

from analytics import cli
from analytics.config import ParseOptions
from analytics.ingest.formats import FormatError, parse_file


def run_cli(capsys, *argv) -> tuple[int, object]:
    rc = cli.main([str(a) for a in argv])
    return rc, json.loads(capsys.readouterr().out)


def test_a_one_row_hourly_file_is_refused_at_its_row(tmp_path):
    # An Electricity Maps yearly export of one year: the hourly file's columns, one row
    f = tmp_path / "SE_2021_yearly.csv"
    f.write_text(f"{NEW_HEADER}\n{NEW_ROWS[0]}\n", encoding="utf-8")
    with pytest.raises(FormatError) as err:
        parse_file(f)
    assert (err.value.line, "one row per series") == (2, "one row per series")
    assert "yearly or monthly export" in str(err.value)
    f.write_text("\n".join([NEW_HEADER, *NEW_ROWS]) + "\n", encoding="utf-8")
    assert parse_file(f).frame.height == 4  # two hours, two bases: hourly, kept


def _case41_lines() -> list[dict]:
    return [json.loads(x) for x in case_file("41-vllm-bench-failed-requests.jsonl")
            .read_text().splitlines() if x.strip()]


def test_a_failed_count_inferred_from_num_prompts_is_said(tmp_path):
    one, two = _case41_lines()
    del one["failed"]  # an older vllm bench: no failed field, but num_prompts and completed
    f = tmp_path / "runs.jsonl"
    f.write_text(json.dumps(one) + "\n" + json.dumps(two) + "\n")
    p = parse_file(f)
    assert p.frame["failed_requests"].to_list() == [2, 74]
    assert p.sources["failed_requests"] == "failed (else num_prompts - completed)"
    assert any("num_prompts - completed for 1 run(s)" in a and "(line 1)" in a
               for a in p.assumptions), p.assumptions
    f.write_text(json.dumps(two) + "\n")
    assert parse_file(f).sources["failed_requests"] == "failed"


def test_one_all_failed_run_is_left_out_and_the_others_kept(tmp_path):
    one, two = _case41_lines()
    dead = {**two, "completed": 0, "failed": 200, "total_input_tokens": 0,
            "total_output_tokens": 0, "output_throughput": 0.0}
    f = tmp_path / "runs.jsonl"
    f.write_text("\n".join(json.dumps(d) for d in (one, dead, two)) + "\n")
    p = parse_file(f)
    assert p.frame["failed_requests"].to_list() == [2, 74]
    left = [w for w in p.warnings if getattr(w, "column", None) == "completed"]
    assert left and tuple(left[0].lines) == (2,) and "every request failed" in left[0].message
    f.write_text(json.dumps(dead) + "\n")
    with pytest.raises(FormatError) as err:
        parse_file(f)
    assert (err.value.line, err.value.column) == (1, "completed")
    assert "no request completed (200 failed)" in str(err.value)


def test_times_without_an_offset_are_counted_beside_those_with_one(tmp_path, capsys):
    f = tmp_path / "requests.csv"
    f.write_text("ts,prompt_tokens,completion_tokens\n"
                 "2024-05-10T00:00:00Z,10,5\n2024-05-10T00:00:01,11,6\n"
                 "2024-05-10T00:00:02+00:00,12,7\n2024-05-10T00:00:03,13,8\n")
    p = parse_file(f)
    said = [a for a in p.assumptions if "time zone" in a]
    assert said == ["time zone assumed: 2 of 4 the file's ts times have no offset (the first at "
                    "line 3) and were read as UTC (give --tz with the zone they were written "
                    "in); the other 2 were converted to UTC with their own offset"]
    # Azure 2023: TIMESTAMP has no offset (the release is UTC): the streamed reader says so
    azure = shared("azure_llm/AzureLLMInferenceTrace_conv.csv")
    db = tmp_path / "s.duckdb"
    rc, rep = run_cli(capsys, "--db", db, "ingest", azure)
    assert rc == 0 and rep[0]["rows"] == 19366, rep
    assert rep[0]["assumptions"] == [
        "time zone assumed: TIMESTAMP times have no offset and were read as UTC (the Azure "
        "traces are written in UTC; --tz does not apply)"]
    g = tmp_path / "azure_mixed.csv"
    g.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6444640,374,44\n"
                 "2023-11-16 18:15:50.9903800+00:00,396,109\n")
    assert parse_file(g).assumptions == (
        "time zone assumed: 1 of 2 TIMESTAMP times have no offset (the first at line 2) and were "
        "read as UTC (the Azure traces are written in UTC; --tz does not apply); the other 1 "
        "were converted to UTC with their own offset",)


def test_a_given_t0_is_reported_as_given(tmp_path, capsys):
    f = tmp_path / "BurstGPT_small.csv"
    f.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                 "5,ChatGPT,10,20,30,Conversation log\n9,GPT-4,11,0,11,Conversation log\n")
    db = tmp_path / "s.duckdb"
    rc, rep = run_cli(capsys, "--db", db, "ingest", f, "--t0", "2024-03-04T00:00:00Z")
    assert rc == 0, rep
    t0 = [a for a in rep[0]["assumptions"] if "start time" in a]
    assert t0 and t0[0].startswith("start time given:") and "2024-03-04T00:00:00Z" in t0[0]
    assert "give --t0" not in t0[0]
    assert "weekdays are those of the t0 given at ingest" in json.dumps(rep[0]["warnings"])
    rc, rep = run_cli(capsys, "--db", tmp_path / "t.duckdb", "ingest", f)
    assert [a for a in rep[0]["assumptions"] if "start time" in a][0].startswith(
        "start time assumed:")


@pytest.fixture(scope="module")
def gap_store(tmp_path_factory):
    db = tmp_path_factory.mktemp("gap") / "s.duckdb"
    assert cli.main(["--db", str(db), "ingest", str(case_file("42-nvidia-smi-logging-gap.csv")),
                     "--name", "gap"]) == 0
    return db


def test_a_window_inside_a_gap_counts_the_gap_and_an_empty_one_is_refused(gap_store, capsys):
    capsys.readouterr()
    rc, doc = run_cli(capsys, "--db", gap_store, "telemetry", "summary", "gap",
                      "--start", "2024-05-10T14:05:00", "--end", "2024-05-10T14:10:02")
    gpu = doc["gpus"][0]
    assert rc == 0 and (gpu["samples"], gpu["energy_power_j"], gpu["measured_s"]) == (3, 120.0, 2.0)
    assert (gpu["gaps"], gpu["gap_s"]) == (1, 300.0)
    assert (gpu["first_gap_start"], gpu["first_gap_end"]) == ("2024-05-10T14:05:00",
                                                              "2024-05-10T14:10:00")
    rc, doc = run_cli(capsys, "--db", gap_store, "telemetry", "summary", "gap",
                      "--start", "2024-05-10T14:03:00", "--end", "2024-05-10T14:09:00")
    assert rc == 2 and "no sample in the window" in doc["error"]
    assert "the samples run from 2024-05-10T14:00:00 to 2024-05-10T14:10:02" in doc["error"]
    rc, doc = run_cli(capsys, "--db", gap_store, "telemetry", "summary", "gap",
                      "--start", "2024-05-10T14:00:00", "--end", "2024-05-10T14:00:02")
    assert doc["gpus"][0]["samples"] == 3
    assert {r["samples_in_window"] for r in doc["window_averages"]} == {3}


def test_a_logger_that_changed_its_rate_has_no_gap(tmp_path, capsys):
    head = "timestamp, index, power.draw [W], utilization.gpu [%]\n"
    slow = [f"2024/05/10 14:00:{s:02d}.000, 0, 100.00 W, 50 %" for s in range(0, 60, 10)]
    fast = [f"2024/05/10 14:01:{s:02d}.000, 0, 100.00 W, 50 %" for s in range(0, 40)]
    f = tmp_path / "smi.csv"
    f.write_text(head + "\n".join(slow + fast) + "\n")
    p = parse_file(f)
    assert not [w for w in p.warnings if "logging gap" in str(w)]
    db = tmp_path / "s.duckdb"
    assert cli.main(["--db", str(db), "ingest", str(f), "--name", "smi"]) == 0
    capsys.readouterr()
    rc, doc = run_cli(capsys, "--db", db, "telemetry", "summary", "smi", "--start",
                      "2024-05-10T14:00:00", "--end", "2024-05-10T14:02:00")
    gpu = doc["gpus"][0]
    assert (gpu["gaps"], gpu["measured_s"], gpu["energy_power_j"]) == (0, 99.0, 9900.0)
    # a stopped logger in the fast part is still a gap
    f.write_text(head + "\n".join(slow + fast[:20] + [
        f"2024/05/10 14:03:{s:02d}.000, 0, 100.00 W, 50 %" for s in range(0, 20)]) + "\n")
    gaps = [w for w in parse_file(f).warnings if "logging gap" in str(w)]
    assert gaps and tuple(gaps[0].lines) == (28,)


def test_an_assumption_of_one_appended_file_names_that_file(tmp_path, capsys):
    rows = [f"2024-05-10T00:00:{s:02d}{z},10,5" for s, z in ((0, "Z"), (1, "Z"))]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("ts,prompt_tokens,completion_tokens\n" + "\n".join(rows) + "\n")
    b.write_text("ts,prompt_tokens,completion_tokens\n2024-05-10T00:00:02,10,5\n")
    db = tmp_path / "s.duckdb"
    assert cli.main(["--db", str(db), "ingest", str(a), "--name", "d"]) == 0
    assert cli.main(["--db", str(db), "ingest", str(b), "--append", "d"]) == 0
    capsys.readouterr()
    rc, doc = run_cli(capsys, "--db", db, "summary", "d")
    assert rc == 0 and doc["assumptions"] == [
        f"in {b}: time zone assumed: the file's ts times have no offset and were read as UTC "
        "(give --tz with the zone they were written in)"]


def test_a_short_step_back_is_not_called_a_dst_repeat(tmp_path):
    head = "timestamp, index, power.draw [W]\n"
    secs = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2, 13, 14]  # 10 s back at line 15
    f = tmp_path / "smi.csv"
    f.write_text(head + "".join(f"2024/05/10 14:00:{s:02d}.000, 0, 100.00 W\n" for s in secs))
    notes = [w for w in parse_file(f).warnings if "steps back" in str(w)]
    assert len(notes) == 1 and "less than 30 min" in notes[0].message
    assert tuple(notes[0].lines) == (15,) and "daylight saving ends" not in notes[0].message
    # the fall-back hour: 01:59:59 then 01:00:00 is still named as one
    f.write_text(head + "2024/11/03 01:59:58.000, 0, 100.00 W\n2024/11/03 01:59:59.000, 0, "
                 "100.00 W\n2024/11/03 01:00:00.000, 0, 100.00 W\n2024/11/03 01:00:01.000, 0, "
                 "100.00 W\n")
    notes = [w for w in parse_file(f).warnings if "steps back" in str(w)]
    assert len(notes) == 1 and "daylight saving ends" in notes[0].message
    assert tuple(notes[0].lines) == (4,)


def test_elapsed_raw_that_disagrees_with_end_minus_start_is_named(tmp_path):
    # case 22's jobs with the ElapsedRaw sacct prints for them: read without --tz, job 8002's
    # End - Start is 3 h but Slurm counted the repeated hour (14,400 s)
    lines = case_file("22-sacct-dst-local-times.txt").read_text().splitlines()
    raw = {"8002": 14400, "8001": 1800, "8010": 3600}
    out = [lines[0] + "|ElapsedRaw"]
    for line in lines[1:4]:
        out.append(f"{line}|{raw[line.split('|')[0]]}")
    f = tmp_path / "sacct.txt"
    f.write_text("\n".join(out) + "\n")
    p = parse_file(f)
    said = [w for w in p.warnings if "differs from End - Start" in str(w)]
    assert said and tuple(said[0].lines) == (2, 3) and "up to 3,600 s" in said[0].message
    assert p.frame["elapsed_s"].to_list() == [14400.0, 1800.0, 3600.0]
    p = parse_file(f, opts=ParseOptions(tz="America/New_York"))
    assert not [w for w in p.warnings if "differs from End - Start" in str(w)]
