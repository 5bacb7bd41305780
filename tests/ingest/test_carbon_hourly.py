"""Issue 14 items 11 and 12 at ingest.

Item 11: Electricity Maps exports renamed their columns in 2024 (``Zone id``, ``Carbon intensity
gCO₂eq/kWh (Life cycle)``); old and new names are recognised, the basis used is stated, and a
file without an intensity column is refused naming the names looked for and the header found.
Item 12: hourly carbon / price / weather files report blank values *and* absent hours (how many,
which) as notes; nothing is filled at ingest.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime

import polars as pl
import pytest
from conftest import shared

from analytics.config import ParseOptions
from analytics.ingest.formats import FormatError, detect, parse_file
from analytics.schema import Note

OLD_HEADER = ("Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
              "Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,"
              "Data Source,Data Estimated,Data Estimation Method")
NEW_HEADER = ("Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
              "Carbon intensity gCO₂eq/kWh (Life cycle),Carbon-free energy percentage (CFE%),"
              "Renewable energy percentage (RE%),Data source,Data estimated,"
              "Data estimation method")
# 2021-01-01, Sweden, as the Electricity Maps portal writes it (values of its public sample)
NEW_ROWS = ["2021-01-01 00:00:00,Sweden,Sweden,SE,2.54,30.02,99.42,60.13,svk.se,true,"
            "ESTIMATED_FORECASTS_HIERARCHY",
            "2021-01-01 01:00:00,Sweden,Sweden,SE,2.6,30.32,99.4,59.52,svk.se,true,"
            "ESTIMATED_FORECASTS_HIERARCHY"]


def _notes(parsed) -> list[Note]:
    return [w for w in parsed.warnings if isinstance(w, Note)]


def _real_rows(n: int) -> list[str]:
    """The first ``n`` data lines of the staged Green-DCC (old-shape) California file."""
    with gzip.open(shared("green_dcc/carbon_intensity/US-CAL-CISO_2023_hourly.csv.gz"), "rt",
                   encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    assert lines[0] == OLD_HEADER  # the staged files are the old (pre-2024) shape
    return lines[1:n + 1]


def test_old_shape_real_rows_store_both_bases_and_say_so(tmp_path):
    f = tmp_path / "US-CAL-CISO_2023_hourly.csv"
    f.write_text("\n".join([OLD_HEADER, *_real_rows(48)]) + "\n", encoding="utf-8")
    p = parse_file(f)
    assert (p.format, p.frame.height) == ("greendcc_carbon", 96)
    first = p.frame.filter(pl.col("ts") == datetime(2023, 1, 1)).sort("basis")
    assert first["basis"].to_list() == ["LCA", "direct"]
    assert first["gco2_per_kwh"].to_list() == [309.75, 238.69]
    assert first["site"].to_list() == ["US-CAL-CISO"] * 2
    said = {n.column: n.message for n in _notes(p)}
    assert said["Carbon Intensity gCO₂eq/kWh (LCA)"].startswith("basis LCA (life-cycle)")
    assert said["Carbon Intensity gCO₂eq/kWh (direct)"].startswith("basis direct")


def test_new_2024_shape_is_recognised(tmp_path):
    f = tmp_path / "SE_2021_hourly.csv"
    f.write_text("\n".join([NEW_HEADER, *NEW_ROWS]) + "\n", encoding="utf-8")
    assert detect(f).NAME == "greendcc_carbon"
    p = parse_file(f)
    lca = p.frame.filter(pl.col("basis") == "LCA")
    assert lca["gco2_per_kwh"].to_list() == [30.02, 30.32]
    assert lca["site"].to_list() == ["SE", "SE"]
    assert p.frame.filter(pl.col("basis") == "direct")["gco2_per_kwh"].to_list() == [2.54, 2.6]
    assert any(n.column == "Carbon intensity gCO₂eq/kWh (Life cycle)"
               and "basis LCA (life-cycle)" in n for n in _notes(p))


def test_basis_option_keeps_one_basis(tmp_path):
    f = tmp_path / "SE_2021_hourly.csv"
    f.write_text("\n".join([NEW_HEADER, *NEW_ROWS]) + "\n", encoding="utf-8")
    p = parse_file(f, opts=ParseOptions(carbon_basis="direct"))
    assert p.frame["basis"].to_list() == ["direct", "direct"]
    assert p.frame["gco2_per_kwh"].to_list() == [2.54, 2.6]


def test_loose_names_co2_and_spacing(tmp_path):
    f = tmp_path / "DE_2024_hourly.csv"
    f.write_text("datetime (utc),ZONE ID,Carbon intensity gCO2eq/kWh (life-cycle)\n"
                 "2024-03-01 00:00:00,DE,410.5\n2024-03-01 01:00:00,DE,398.25\n")
    p = parse_file(f)
    assert p.format == "greendcc_carbon"
    assert p.frame["basis"].to_list() == ["LCA", "LCA"]
    assert p.frame["gco2_per_kwh"].to_list() == [410.5, 398.25]
    assert any("no direct intensity column" in w for w in p.warnings)


def test_file_with_only_the_direct_column(tmp_path):
    f = tmp_path / "FR_2024_hourly.csv"
    f.write_text("Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct)\n"
                 "2024-01-01 00:00:00,France,France,FR,21.3\n"
                 "2024-01-01 01:00:00,France,France,FR,20.9\n", encoding="utf-8")
    p = parse_file(f)
    assert p.frame["basis"].to_list() == ["direct", "direct"]
    assert p.frame["gco2_per_kwh"].to_list() == [21.3, 20.9]
    assert any("no life-cycle intensity column in the file; only basis direct stored" in w
               for w in p.warnings)
    with pytest.raises(FormatError) as exc:  # asking for life-cycle that is not there
        parse_file(f, opts=ParseOptions(carbon_basis="LCA"))
    assert exc.value.line == 1 and "(Life cycle)" in exc.value.reason
    assert "Carbon intensity gCO₂eq/kWh (direct)" in exc.value.reason  # the header found


def test_file_without_a_carbon_column_lists_looked_for_and_found(tmp_path):
    f = tmp_path / "PL_2024_hourly.csv"
    f.write_text("Datetime (UTC),Country,Zone name,Zone id,Carbon-free energy percentage (CFE%)\n"
                 "2024-01-01 00:00:00,Poland,Poland,PL,22.1\n", encoding="utf-8")
    assert detect(f).NAME == "greendcc_carbon"
    with pytest.raises(FormatError) as exc:
        parse_file(f)
    e = exc.value
    assert e.line == 1
    for looked in ("Carbon Intensity gCO₂eq/kWh (LCA)", "Carbon intensity gCO₂eq/kWh (Life cycle)",
                   "Carbon intensity gCO₂eq/kWh (direct)"):
        assert looked in e.reason
    assert "the header has ['Datetime (UTC)', 'Country', 'Zone name', 'Zone id', " \
           "'Carbon-free energy percentage (CFE%)']" in e.reason


# --------------------------------------------------------------------------- item 12: ingest
def sustaindc_with_gaps(tmp_path):
    """The real CISO file with 2022-01-08 05:00 blanked and 06:00, 07:00 deleted (those hours
    fall in the test window of the BurstGPT week, which dispatch aligns onto 2022-01-07 21:00 ..
    2022-01-08 23:00); also used by the dispatch tests."""
    lines = shared("sustaindc_dcrl/CarbonIntensity/CISO_NG_&_avgCI.csv").read_text().splitlines()
    header = lines[0].split(",")
    ci = header.index("avg_CI")
    rows = lines[1:]
    # blank the value of 2022-01-08 05:00 (data line 7*24+5 = 173), drop 06:00 and 07:00
    cells = rows[173].split(",")
    assert cells[0].startswith("2022-01-08 05:00")
    cells[ci] = ""
    rows[173] = ",".join(cells)
    kept = rows[:174] + rows[176:]
    out = tmp_path / "CISO_NG_&_avgCI.csv"
    out.write_text("\n".join([lines[0], *kept]) + "\n")
    return out


def test_sustaindc_blank_value_and_two_absent_hours_are_named(tmp_path):
    p = parse_file(sustaindc_with_gaps(tmp_path))
    assert p.frame.height == 8758
    notes = _notes(p)
    absent = next(n for n in notes if n.message.startswith("hours absent"))
    assert absent.count == 2 and absent.column == "timestamp"
    assert "first missing 2022-01-08 06:00, 2022-01-08 07:00" in absent.message
    assert "gap before line 176" in absent.message  # the 08:00 row, right after the gap
    blank = next(n for n in notes if n.column == "avg_CI")
    assert 175 in blank.lines  # 05:00 blanked (line 175), kept empty
    assert "2022-01-08 05:00" in blank.message
    # the real file's own three empty hours are counted with it
    assert blank.count == 4
    assert p.frame.filter(pl.col("ts") == datetime(2022, 1, 8, 5))["gco2_per_kwh"][0] is None


def test_prices_file_with_absent_hours_and_a_blank_price(tmp_path):
    with gzip.open(shared("green_dcc/electricity_prices/US-CAL-CISO_electricity_prices_2023"
                          ".csv.gz"), "rt") as fh:
        lines = fh.read().splitlines()[:49]
    head, rows = lines[0], lines[1:]
    rows[2] = ",".join(rows[2].split(",")[:2] + [""])  # 02:00 price blank
    rows = rows[:10] + rows[13:]  # 10:00, 11:00, 12:00 absent
    f = tmp_path / "US-CAL-CISO_electricity_prices_2023.csv"
    f.write_text("\n".join([head, *rows]) + "\n")
    p = parse_file(f)
    assert p.format == "greendcc_prices" and p.frame.height == 45
    absent = next(n for n in _notes(p) if n.message.startswith("hours absent"))
    assert absent.count == 3
    assert "first missing 2023-01-01 10:00, 2023-01-01 11:00, 2023-01-01 12:00" in absent.message
    blank = next(n for n in _notes(p) if n.column == "Price (USD/MWh)")
    assert blank.lines == (4,) and blank.count == 1


def test_epw_weather_with_deleted_records(tmp_path):
    with gzip.open(shared("sustaindc_dcrl/Weather/USA_IL_Chicago.OHare.epw.gz"), "rt") as fh:
        lines = fh.read().splitlines()
    kept = lines[:8 + 100] + lines[8 + 105:]  # records 101..105 (Jan 5, 05:00..09:00 LST) gone
    f = tmp_path / "USA_IL_Chicago.OHare.epw"
    f.write_text("\n".join(kept) + "\n")
    p = parse_file(f)
    assert p.frame.height == 8755
    absent = next(n for n in _notes(p) if n.message.startswith("hours absent"))
    assert absent.count == 5
    # hour 5 of Jan 5 at UTC-6 starts 10:00 UTC
    assert "first missing 2022-01-05 10:00, 2022-01-05 11:00" in absent.message
    assert "gap before line 109" in absent.message


def test_openmeteo_nulls_and_absent_hours(tmp_path):
    with gzip.open(shared("green_dcc/weather/DE-LU_2023.json.gz"), "rt") as fh:
        doc = json.load(fh)
    h = doc["hourly"]
    for key in list(h):
        h[key] = h[key][:24]
        del h[key][5:7]  # 05:00 and 06:00 local absent
    h["temperature_2m"][0] = None
    f = tmp_path / "DE-LU_2023.json"
    f.write_text(json.dumps(doc))
    p = parse_file(f)
    assert p.frame.height == 22
    absent = next(n for n in _notes(p) if n.message.startswith("hours absent"))
    assert absent.count == 2 and absent.column == "hourly.time"
    assert "first missing 2023-01-01 04:00, 2023-01-01 05:00" in absent.message  # UTC+1
    blank = next(n for n in _notes(p) if n.column == "hourly.temperature_2m")
    assert blank.count == 1 and "2022-12-31 23:00" in blank.message


def test_canonical_carbon_per_site_and_basis(tmp_path):
    f = tmp_path / "mine.csv"
    f.write_text("site,ts,gco2_per_kwh,basis\n"
                 "A,2022-01-01 00:00:00,100,avg\nA,2022-01-01 01:00:00,,avg\n"
                 "A,2022-01-01 04:00:00,120,avg\n"
                 "B,2022-01-01 00:00:00,90,avg\nB,2022-01-01 01:00:00,95,avg\n")
    p = parse_file(f)
    assert p.frame.height == 5
    absent = [n for n in _notes(p) if n.message.startswith("hours absent")]
    assert len(absent) == 1 and absent[0].count == 2
    assert "for site A, basis avg" in absent[0].message
    blank = next(n for n in _notes(p) if n.column == "gco2_per_kwh")
    assert blank.lines == (3,)


def test_cli_carbon_basis_option_and_report(tmp_path, capsys):
    from analytics import cli

    f = tmp_path / "SE_2021_hourly.csv"
    f.write_text("\n".join([NEW_HEADER, *NEW_ROWS]) + "\n", encoding="utf-8")
    db = str(tmp_path / "d.duckdb")
    assert cli.main(["--db", db, "ingest", str(f), "--carbon-basis", "LCA"]) == 0
    (rep,) = json.loads(capsys.readouterr().out)
    assert (rep["format"], rep["rows"]) == ("greendcc_carbon", 2)
    basis = next(w for w in rep["warnings"] if w["message"].startswith("basis LCA"))
    assert basis["column"] == "Carbon intensity gCO₂eq/kWh (Life cycle)"
    bad = tmp_path / "PL_2024_hourly.csv"
    bad.write_text("Datetime (UTC),Zone id,Renewable energy percentage (RE%)\n"
                   "2024-01-01 00:00:00,PL,22.1\n")
    assert cli.main(["--db", db, "ingest", str(bad)]) == 2
    out = capsys.readouterr().out
    assert "looked for" in out and "Renewable energy percentage (RE%)" in out


def test_electricity_maps_blank_intensity_and_absent_hour(tmp_path):
    f = tmp_path / "SE_2021_hourly.csv"
    rows = [*NEW_ROWS,
            "2021-01-01 02:00:00,Sweden,Sweden,SE,2.7,,99.4,59.5,svk.se,true,",
            "2021-01-01 05:00:00,Sweden,Sweden,SE,2.8,31.0,99.4,59.5,svk.se,true,"]
    f.write_text("\n".join([NEW_HEADER, *rows]) + "\n", encoding="utf-8")
    p = parse_file(f)
    lca = p.frame.filter(pl.col("basis") == "LCA")
    assert lca["gco2_per_kwh"].to_list() == [30.02, 30.32, None, 31.0]
    blank = next(n for n in _notes(p) if n.message.startswith("life-cycle carbon intensity"))
    assert (blank.column, blank.lines, blank.count) == (
        "Carbon intensity gCO₂eq/kWh (Life cycle)", (4,), 1)
    absent = next(n for n in _notes(p) if n.message.startswith("hours absent"))
    assert absent.count == 2 and "for site SE" in absent.message
    assert "first missing 2021-01-01 03:00, 2021-01-01 04:00 (gap before line 5)" in absent.message
