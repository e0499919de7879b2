"""The measuring methods: one object each, found from the case alone, each naming its runner's
part, its record builder, its estimate and its stopping rule; and no other module of the layers
that run, plan or show a case tells the methods apart by comparing their names."""
from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_gpu_pairs.experiment.cases import Overrides, expand_all
from pytest_gpu_pairs.experiment.load import parse_experiment
from pytest_gpu_pairs.record.build import case_record, interleaved_record
from pytest_gpu_pairs.record.scaling import scaling_record
from pytest_gpu_pairs.run.case import CaseContext, CaseRun
from pytest_gpu_pairs.run.methods import EPOCH, INTERLEAVED, METHODS, MIN_INTERLEAVED_ROUNDS, SCALING, method_of
from pytest_gpu_pairs.run.options import (
    DEFAULT_PRECISION,
    MAX_CASE_S,
    MAX_CASE_S_CPU,
    MIN_ROUNDS_FOR_PRECISION,
)
from pytest_gpu_pairs.run.pair import EpochRounds, InterleavedRounds
from pytest_gpu_pairs.run.scaling import ScalingRanks

PACKAGE = Path(__file__).resolve().parents[3] / "pytest_gpu_pairs"
PAIR = {"group": "g01", "foreground": {"model": "resnet20"}, "background": {"model": "mnist"}}


def cases(data: dict, **overrides):
    return expand_all([parse_experiment({"name": "m", **data}, "m.json")], Overrides(**overrides))


def test_every_method_is_registered_under_the_name_its_cases_and_records_carry():
    assert METHODS == {"epoch": EPOCH, "interleaved": INTERLEAVED, "steps": SCALING}
    assert (EPOCH.record, INTERLEAVED.record, SCALING.record) == (case_record, interleaved_record, scaling_record)


def test_a_case_finds_its_method_from_what_its_design_and_the_option_decided():
    pairs = cases({"pairs": [PAIR]})
    assert [method_of(c) for c in pairs] == [INTERLEAVED]  # the pairs design's default
    assert [method_of(c) for c in cases({"pairs": [PAIR]}, method="epoch")] == [EPOCH]
    study = cases({"design": "hp_study", "pairs": [{**PAIR, "vary": {"learning_rate": [0.5, 2.0]}}]})
    assert {c.mode for c in study} == {"solo", "concurrent"} and {method_of(c) for c in study} == {EPOCH}
    scaling = cases({"design": "scaling", "scaling": [{"group": "s01", "workload": {"model": "resnet20"}}]})
    assert {method_of(c) for c in scaling} == {SCALING}


def test_an_unknown_method_is_refused_in_one_line_naming_the_case():
    with pytest.raises(ValueError, match=r"^case c1: unknown method 'weekly'; expected one of epoch, interleaved, steps$"):
        method_of(SimpleNamespace(id="c1", method="weekly"))


@given(runs=st.integers(1, 60), precision=st.one_of(st.none(), st.floats(0.001, 0.5)), off=st.booleans(),
       cap=st.one_of(st.none(), st.floats(1.0, 1000.0)), device=st.sampled_from(["cuda", "cpu"]))
def test_only_the_interleaved_method_has_a_stopping_rule_and_it_keeps_its_floor(runs, precision, off, cap, device):
    case = SimpleNamespace(runs_per_config=runs, precision=0.0 if off else precision, max_rounds=None, max_case_s=cap)
    rule = INTERLEAVED.stopping_rule(case, device)
    assert rule.min_rounds >= max(MIN_INTERLEAVED_ROUNDS, runs)
    if rule.precision is not None:
        assert rule.min_rounds >= MIN_ROUNDS_FOR_PRECISION
    assert (rule.precision is None) == (off or (precision is None and device == "cpu"))
    assert rule.precision in (None, precision, DEFAULT_PRECISION)
    assert rule.max_seconds == (cap if cap is not None else MAX_CASE_S if device == "cuda" else MAX_CASE_S_CPU)
    assert EPOCH.stopping_rule(case, device) is None and SCALING.stopping_rule(case, device) is None


def test_the_stopping_rule_is_decided_when_the_case_is_built_from_the_options():
    [case] = cases({"pairs": [PAIR]}, precision=0.0, max_rounds=40, max_case_s=60.0)
    assert (case.precision, case.max_rounds, case.max_case_s) == (0.0, 40, 60.0)
    rule = INTERLEAVED.stopping_rule(case, "cuda")
    assert (rule.precision, rule.max_rounds, rule.max_seconds) == (None, 40, 60.0)
    [default] = cases({"pairs": [PAIR]})
    assert INTERLEAVED.stopping_rule(default, "cuda").precision == DEFAULT_PRECISION


def test_each_method_asks_the_estimator_for_its_own_estimate():
    asked = []
    estimates = SimpleNamespace(**{name: (lambda case, name=name: asked.append(name) or name)
                                   for name in ("epoch", "interleaved", "scaling")})
    answers = [method.estimate(estimates, SimpleNamespace()) for method in (EPOCH, INTERLEAVED, SCALING)]
    assert answers == asked == ["epoch", "interleaved", "scaling"]


def test_only_the_interleaved_methods_rounds_are_timed_by_the_round_clock():
    assert [m.name for m in METHODS.values() if m.round_clock] == ["interleaved"]


def context(device: str = "cpu") -> CaseContext:
    env = SimpleNamespace(device=device, scale=1.0)
    return CaseContext(SimpleNamespace(), SimpleNamespace(environment=lambda: env), SimpleNamespace(),
                       SimpleNamespace(), SimpleNamespace(), lambda case, record, benchmark: None, [])


@pytest.mark.parametrize("method, part", [(EPOCH, EpochRounds), (INTERLEAVED, InterleavedRounds)])
def test_each_method_runs_its_case_in_the_one_wrapper_with_its_own_part(method, part):
    [case] = cases({"pairs": [PAIR]}, method=method.name)
    run = method.runner(case, context(), SimpleNamespace(), None)
    assert type(run) is CaseRun and type(run.part) is part and run.part.build is method.record
    assert run.timeline == {"solo": [], "rounds": [], "cool_down_s": 0.0}


def test_an_interleaved_part_is_given_its_methods_rule_for_the_device_the_case_runs_on():
    [case] = cases({"pairs": [PAIR]})
    rule = INTERLEAVED.runner(case, context("cuda"), SimpleNamespace(), None).part.rule
    assert rule == INTERLEAVED.stopping_rule(case, "cuda") and rule.precision is not None


def test_a_scaling_case_runs_in_the_same_wrapper_with_the_ranks_part():
    case = cases({"design": "scaling", "scaling": [{"group": "s01", "workload": {"model": "resnet20"}}]})[0]
    run = SCALING.runner(case, context(), SimpleNamespace(), None)
    assert type(run) is CaseRun and type(run.part) is ScalingRanks and run.part.build is scaling_record


METHOD_WORDS = {method.name for method in METHODS.values()} | {"scaling"}
RULED_LAYERS = ("run", "plugin", "planning")  # the layers that run, plan and show a case


def name_compares(source: str) -> list[str]:
    """Every comparison of a method or design (``case.method``, ``record.get("design")``) with a
    method's name written as a string (a log pattern's group named "epoch" is no method)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = [side for side in sides if any(isinstance(w, ast.Constant) and w.value in METHOD_WORDS
                                               for w in (side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set))
                                                         else [side]))]
        others = " ".join(ast.unparse(side) for side in sides if side not in named)
        if named and ("method" in others or "design" in others):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_that_runs_plans_or_shows_a_case_compares_a_methods_name():
    registry = PACKAGE / "run" / "methods.py"
    found = [f"{path.relative_to(PACKAGE.parent)}:{hit}" for layer in RULED_LAYERS
             for path in sorted((PACKAGE / layer).rglob("*.py")) if path != registry
             for hit in name_compares(path.read_text(encoding="utf-8"))]
    assert not found, "ask run.methods.method_of(case), not the name: " + "; ".join(found)


def test_the_name_rule_finds_a_comparison_written_either_way():
    source = ('a = case.method == "interleaved"\nb = "steps" != record.get("method")\n'
              'c = case.design in ("scaling", "x")\nok = "epoch" in self._groups\nalso_ok = case.mode == "solo"\n')
    assert name_compares(source) == ["1: case.method == 'interleaved'", "2: 'steps' != record.get('method')",
                                     "3: case.design in ('scaling', 'x')"]


CASE_MODULES = ("case", "pair", "scaling", "interleaved", "round", "methods", "outdir", "device", "solos")


@pytest.mark.parametrize("module", CASE_MODULES)
def test_what_runs_a_case_does_not_import_the_session(module):
    """A case reaches the session's parts through its ``CaseContext``: the session is no hub a case's
    every step passes through."""
    tree = ast.parse((PACKAGE / "run" / f"{module}.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert "pytest_gpu_pairs.run.session" not in imported
