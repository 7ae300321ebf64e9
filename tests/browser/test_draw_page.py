"""The HTML page of ``draw`` in a real headless Chromium: it loads without console errors,
hovering a node shows that node's details, the wheel zooms and a drag pans, a click on a unit
opens its detail, and a screenshot shows the fault and group colours the legend promises."""

from __future__ import annotations

import io
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.conftest import real_fixture
from topograph_slurm.cli.main import main

PIL = pytest.importorskip(
    "PIL.Image", reason="Pillow decodes the screenshots (pip install -e '.[test]')"
)

FAULTY = "nodes=64,su=16,rails=4,degraded=3,disagree=5"
ORANGE_DEGRADED = (255, 127, 14)  # .fault-degraded in templates/draw.css.j2
PINK_DISAGREE = (227, 119, 194)  # .fault-rail-disagreement
RED_SLOW = (214, 39, 40)  # .slow
GREY_NODE = (144, 164, 174)  # .node


def _page(tmp_path: Path, name: str, *args: str) -> Path:
    out = tmp_path / name
    result = CliRunner().invoke(main, ["--config", os.devnull, "draw", *args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _open(browser: Any, page: Path) -> None:
    browser.get(page.as_uri())
    browser.get_log("browser")  # drop what an earlier page left


def _errors(browser: Any) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def _colours(browser: Any) -> Counter[tuple[int, int, int]]:
    image = PIL.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")
    return Counter({colour: count for count, colour in image.getcolors(1 << 24)})


def _by_css(browser: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, selector)


def test_fabric_page_hover_zoom_pan_and_colours(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

    _open(browser, _page(tmp_path, "fabric.html", "--sim", FAULTY))
    svg = _by_css(browser, ".pic:not([hidden]) svg")
    home = svg.get_dom_attribute("viewBox")
    node = _by_css(browser, 'rect.node[data-key="gpu0001"]')
    ActionChains(browser).move_to_element(node).perform()
    tip = _by_css(browser, "#tip")
    assert tip.is_displayed()
    assert "gpu0001" in tip.text and "leaf leaf-su001-r0" in tip.text
    assert "degraded: gpu0001 mlx5_0/1 <-> leaf-su001-r0/1 runs at 1xNDR" in tip.text

    colours = _colours(browser)
    assert colours[ORANGE_DEGRADED] > 50, "degraded nodes and rails are orange"
    assert colours[PINK_DISAGREE] > 50, "the node whose rails disagree is pink"
    assert colours[GREY_NODE] > 1000, "healthy nodes are grey"
    assert len(colours) > 20, "the screenshot is not blank"

    ActionChains(browser).scroll_from_origin(ScrollOrigin.from_element(node), 0, -300).perform()
    zoomed = svg.get_dom_attribute("viewBox")
    assert float(zoomed.split()[2]) < float(home.split()[2]), (home, zoomed)
    ActionChains(browser).move_to_element(node).click_and_hold().move_by_offset(
        120, 40
    ).release().perform()
    panned = svg.get_dom_attribute("viewBox")
    assert panned.split()[2:] == zoomed.split()[2:] and panned.split()[:2] != zoomed.split()[:2]
    _by_css(browser, "#reset").click()
    assert svg.get_dom_attribute("viewBox") == home
    assert _errors(browser) == []


def test_a_click_on_a_unit_opens_its_detail(browser: Any, tmp_path: Path) -> None:
    _open(
        browser, _page(tmp_path, "big.html", "--sim", "nodes=2048,su=32,rails=2,tiers=3,degraded=4")
    )
    assert _by_css(browser, ".pic:not([hidden])").get_dom_attribute("data-id") == "overview"
    _by_css(browser, 'rect.unit[data-opens="unit-2"]').click()
    shown = _by_css(browser, ".pic:not([hidden])")
    assert shown.get_dom_attribute("data-id") == "unit-2"
    assert _by_css(browser, "#pick").get_attribute("value") == "unit-2"
    assert shown.find_element("css selector", 'rect.node[data-key="gpu0600"]')
    assert _errors(browser) == []


def test_job_page_draws_slow_group_edges_red(browser: Any, tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        "job.html",
        "--sim",
        FAULTY,
        "--nodes",
        "gpu[0001-0032]",
        "--tp",
        "16",
        "--pp",
        "2",
    )
    _open(browser, page)
    colours = _colours(browser)
    assert colours[RED_SLOW] > 30, "pipeline edges between the two leaves are red"
    edge = _by_css(browser, "path.edge-pp.slow")
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).move_to_element(edge).perform()
    assert "PP group" in _by_css(browser, "#tip").text
    assert _errors(browser) == []


def test_node_page_and_report_page_open_cleanly(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    matrix = real_fixture("nvidia-smi-topo/hgx-h200-8gpu-10nic-amd-2socket.txt")
    _open(browser, _page(tmp_path, "node.html", "--topo-matrix", str(matrix)))
    ActionChains(browser).move_to_element(_by_css(browser, 'rect.gpu[data-key="GPU3"]')).perform()
    assert (
        "GPU 3" in _by_css(browser, "#tip").text and "nearest NIC" in _by_css(browser, "#tip").text
    )
    assert _errors(browser) == []
    report = tmp_path / "report.html"
    result = CliRunner().invoke(
        main, ["--config", os.devnull, "generate", "--sim", FAULTY, "--report", str(report)]
    )
    assert result.exit_code == 0, result.output
    _open(browser, report)
    assert "topograph-slurm report" in _by_css(browser, "pre.report").text
    assert _colours(browser)[ORANGE_DEGRADED] > 20
    assert _errors(browser) == []


_OUTSIDE_VIEWBOX = """
const svg = document.querySelector('svg');
const box = svg.viewBox.baseVal;
const outside = [];
for (const el of svg.querySelectorAll('rect, line, path, text')) {
  const b = el.getBBox();
  if (b.x < box.x - 0.5 || b.y < box.y - 0.5 || b.x + b.width > box.x + box.width + 0.5
      || b.y + b.height > box.y + box.height + 0.5) {
    outside.push(el.outerHTML.slice(0, 160));
  }
}
return outside;
"""

_HIDDEN_RAILS = """
const rails = [...document.querySelectorAll('svg line')]
  .filter(el => (el.querySelector('title') || {textContent: ''}).textContent.includes('\u2192'));
const isRail = hit => rails.some(rail => rail === hit || rail.contains(hit));
const hidden = [];
for (const el of rails) {
  const [x1, y1, x2, y2] = ['x1', 'y1', 'x2', 'y2'].map(name => el[name].baseVal.value);
  const matrix = el.getScreenCTM();
  let seen = false;  // around the midpoint: a dashed rail (cross-NUMA) may have a gap there
  for (let t = 0.4; t <= 0.6 && !seen; t += 0.02) {
    const p = new DOMPoint(x1 + (x2 - x1) * t, y1 + (y2 - y1) * t).matrixTransform(matrix);
    seen = isRail(document.elementFromPoint(p.x, p.y));  // itself, or a rail crossing it
  }
  if (!seen) hidden.push(el.textContent);
}
return [rails.length, hidden];
"""


@pytest.mark.parametrize(
    "capture",
    [
        "dgx-a100-8gpu-12nic-mlx5-columns.txt",
        "h100-8gpu-8ib-5eth-13nic-dgx.txt",
        "hgx-h200-8gpu-10nic-amd-2socket.txt",
        "gb200-4gpu-8nic-grace-openshift.txt",
    ],
)
def test_node_view_draws_inside_its_viewbox_with_its_rails_visible(
    browser: Any, tmp_path: Path, capture: str
) -> None:
    """The matrix's last NIC columns fell outside the viewBox (cut off), and the GPU→NIC
    rails lay under the opaque NUMA boxes: topmost at each one's midpoint is now a rail
    (itself, or one crossing it there), no box."""
    matrix = real_fixture(f"nvidia-smi-topo/{capture}")
    _open(browser, _page(tmp_path, "node.svg", "--topo-matrix", str(matrix)))
    assert browser.execute_script(_OUTSIDE_VIEWBOX) == []
    count, hidden = browser.execute_script(_HIDDEN_RAILS)
    assert count > 0 and hidden == []
    assert _errors(browser) == []
