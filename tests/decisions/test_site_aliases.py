"""Issue 19 item 2: SustainDC publishes one carbon file under a balancing-authority code and a
state code (CISO_ and CA_, ERCO_ and TX_, ...). The bytes are stored once; every site code that
arrived with them is registered, so dispatch and the Dispatch page accept both codes for the one
series."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
from conftest import SHARED_DATA, shared
from harness import strict_loads

from analytics import cli, store
from analytics.config import ParseOptions
from analytics.decisions import sites
from analytics.ingest import files as ingest
from analytics.services import data

CI = "sustaindc_dcrl/CarbonIntensity"
WEEK = "burstgpt/derived/burstgpt1_week1_per_minute_tps.csv"
#: the pairs of SustainDC CarbonIntensity/ whose bytes are equal (sha256 checked below)
PAIRS = {"AZPS": "AZ", "CA": "CISO", "ERCO": "TX", "BPAT": "WA", "GA": "SOCO", "IL": "MISO",
         "NYIS": "NY", "PJM": "VA"}


def _ingest(con, *paths):
    return ingest.ingest_files(con, [ingest.FileIn(p, p.name) for p in paths])


def test_ca_then_ciso_keeps_one_dataset_and_both_codes(con):
    ca, ciso = shared(f"{CI}/CA_NG_&_avgCI.csv"), shared(f"{CI}/CISO_NG_&_avgCI.csv")
    assert ca.read_bytes() == ciso.read_bytes()
    [first] = _ingest(con, ca)
    version = store.data_version(con)
    [dup] = _ingest(con, ciso)
    assert (dup["status"], dup["dataset"], dup["site_alias"]) == (
        "duplicate", "CA_NG_&_avgCI", {"alias": "CISO", "site": "CA"})
    assert "site 'CISO' names its series (site 'CA') too" in dup["hint"]
    assert store.data_version(con) > version  # the site lists are cached on it
    assert store.list_datasets(con)["name"].tolist() == ["CA_NG_&_avgCI"]
    assert store.table_counts(con)["carbon_intensity"] == first["rows"] == 8760
    cat = store.site_catalog(con)
    carbon = cat[cat["tbl"] == "carbon_intensity"].set_index("site")
    assert carbon.loc["CISO", "alias_of"] == "CA" and carbon.loc["CISO", "rows"] == 8760
    assert carbon["alias_of"].isna()["CA"]
    a = store.site_hourly(con, "carbon_intensity", "CISO", "avg")
    b = store.site_hourly(con, "carbon_intensity", "CA", "avg")
    assert a.equals(b) and len(a) == 8760
    # the first hour of the file: 2022-01-01 00:00 UTC, avg_CI 222.29592090536002
    assert a["value"].iloc[0] == pytest.approx(222.29592090536002)
    # the same bytes again under the same alias: nothing new, the data version stays
    version = store.data_version(con)
    [again] = _ingest(con, ciso)
    assert again["site_alias"] == {"alias": "CISO", "site": "CA"}
    assert store.data_version(con) == version
    # deleting the dataset removes the alias with it
    store.delete_dataset(con, "CA_NG_&_avgCI")
    assert store.site_catalog(con).empty
    assert store.site_hourly(con, "carbon_intensity", "CISO").empty


def test_bootstrap_of_the_staged_carbon_folder_keeps_every_code(tmp_path, con):
    folder = tmp_path / "raw"
    shutil.copytree(SHARED_DATA / CI, folder)
    res = ingest.bootstrap(con, folder)
    assert sum(r["status"] == "ingested" for r in res) == 9  # 8 pairs + WAAT
    aliases = {r["site_alias"]["site"]: r["site_alias"]["alias"]
               for r in res if r["status"] == "duplicate"}
    assert aliases == PAIRS  # the code that sorts first is stored, the other is its alias
    cat = store.site_catalog(con)
    codes = set(cat.loc[cat["tbl"] == "carbon_intensity", "site"])
    assert codes == {p.name.split("_")[0] for p in folder.glob("*_NG_&_avgCI.csv")}
    assert len(codes) == 17
    # the README's dispatch example names the balancing authorities; CISO is CA's alias here
    src = sites.site_sources(cat, ["CISO", "ERCO", "BPAT", "PJM", "NYIS"])
    assert [s.alias_of for s in src] == ["CA", None, None, None, None]
    src = sites.site_sources(cat, ["CA", "TX", "WA", "VA", "NY"])
    assert [s.alias_of for s in src] == [None, "ERCO", "BPAT", "PJM", "NYIS"]


def test_dispatch_cli_gives_ciso_the_numbers_of_ca(tmp_path, capsys):
    db = tmp_path / "d.duckdb"
    paths = [shared(WEEK), shared(f"{CI}/CA_NG_&_avgCI.csv"), shared(f"{CI}/ERCO_NG_&_avgCI.csv")]
    assert cli.main(["--db", str(db), "ingest", *map(str, paths)]) == 0
    capsys.readouterr()
    assert cli.main(["--db", str(db), "ingest", str(shared(f"{CI}/CISO_NG_&_avgCI.csv"))]) == 0
    [dup] = strict_loads(capsys.readouterr().out)
    assert dup["site_alias"] == {"alias": "CISO", "site": "CA"}
    docs = {}
    for home in ("CISO", "CA"):
        assert cli.main(["--db", str(db), "dispatch", "burstgpt1_week1_per_minute_tps",
                         "--sites", f"{home},ERCO", "--bin", "1h", "--scale", "1000"]) == 0
        docs[home] = strict_loads(capsys.readouterr().out)
    ciso, ca = docs["CISO"], docs["CA"]
    for key in ("baseline_tco2e", "proportional_tco2e", "carbon_aware_tco2e", "it_mwh"):
        assert ciso[key] == ca[key]
    assert ciso["sites"]["CISO"] == ca["sites"]["CA"]
    assert ciso["sites"]["ERCO"] == ca["sites"]["ERCO"]
    assert ciso["carbon_aware_tco2e"] < ciso["proportional_tco2e"]
    assert "CISO: carbon basis avg (the series stored as CA), no weather" in ciso["notes"]


HOURS = ["2022-03-01 00:00:00+00:00", "2022-03-01 01:00:00+00:00", "2022-03-01 02:00:00+00:00"]


def test_own_upload_of_one_carbon_file_under_two_names(tmp_path):
    """A hand-written SustainDC-layout carbon file uploaded as AAA_... then BBB_...: one dataset,
    both codes, the second reading the first's values."""
    body = "timestamp,WND,SUN,NG,avg_CI\n" + "".join(
        f"{t},1.0,2.0,3.0,{v}\n" for t, v in zip(HOURS, (100.5, 250.0, 175.25), strict=True))
    con = store.connect(tmp_path / "u.duckdb")
    ups = []
    for code in ("AAA", "BBB"):
        up = io.BytesIO(body.encode())
        up.name = f"{code}_NG_&_avgCI.csv"
        ups.append(up)
    res = data.ingest_uploads(con, ups, ParseOptions(), 10**9, tmp_path / "uploads")
    assert [r["status"] for r in res] == ["ingested", "duplicate"]
    assert res[1]["site_alias"] == {"alias": "BBB", "site": "AAA"}
    got = store.site_hourly(con, "carbon_intensity", "BBB", "avg")
    assert got["value"].tolist() == [100.5, 250.0, 175.25]
    [src] = sites.site_sources(store.site_catalog(con), ["BBB"])
    assert (src.name, src.alias_of, src.basis) == ("BBB", "AAA", "avg")


def test_own_price_file_named_by_two_sites_with_the_site_option(tmp_path, capsys):
    """Prices: the same Green-DCC price file ingested with --site X then --site Y."""
    path = tmp_path / "zone_electricity_prices_2022.csv"
    path.write_text("Datetime (UTC),Datetime (Local),Price (USD/MWh)\n" + "".join(
        f"{t},{t[:19]},{p}\n" for t, p in zip(HOURS, (41.0, -3.5, 60.25), strict=True)))
    db = str(tmp_path / "p.duckdb")
    docs = []
    for site in ("US-X", "US-Y", "US-X"):
        assert cli.main(["--db", db, "ingest", "--site", site, str(path)]) == 0
        docs.append(strict_loads(capsys.readouterr().out)[0])
    assert [d["status"] for d in docs] == ["ingested", "duplicate", "duplicate"]
    assert docs[1]["site_alias"] == {"alias": "US-Y", "site": "US-X"}
    assert "site_alias" not in docs[2]  # the bytes again under the site they are stored as
    con = store.connect(db, read_only=True)
    values = store.site_hourly(con, "prices", "US-Y")["value"].to_numpy()
    np.testing.assert_array_equal(values, [41.0, -3.5, 60.25])
    cat = store.site_catalog(con)
    assert cat.loc[cat["site"] == "US-Y", ["tbl", "alias_of"]].values.tolist() == [
        ["prices", "US-X"]]
    con.close()
