"""The client's project: ``project=`` or ``EVALSI_PROJECT`` fills the ``project_id`` of every
request that names none, and leaves one that names its own, or has no such field, alone."""

from __future__ import annotations

import pytest

from evalsi._proto.evalsi.v1alpha1 import catalog_service_pb2 as cat_pb
from evalsi._proto.evalsi.v1alpha1 import dataset_service_pb2 as ds_pb
from evalsi._proto.evalsi.v1alpha1 import run_service_pb2 as run_pb
from evalsi.client import AsyncClient
from evalsi.client._common import scoped


def test_an_empty_project_id_takes_the_clients_project() -> None:
    assert scoped(run_pb.GetRunRequest(id="r"), "alpha").project_id == "alpha"
    assert scoped(ds_pb.ListDatasetsRequest(), "alpha").project_id == "alpha"
    named = scoped(run_pb.GetRunRequest(id="r", project_id="beta"), "alpha")
    assert named.project_id == "beta"  # a call that names its project keeps it
    assert scoped(run_pb.GetRunRequest(id="r"), "").project_id == ""  # the server's default
    assert not scoped(cat_pb.ListEvaluatorsRequest(), "alpha").ListFields()  # no such field


def test_the_project_comes_from_the_argument_else_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVALSI_PROJECT", " checkout ")
    assert AsyncClient("http://127.0.0.1:1").settings.project == "checkout"
    assert AsyncClient("http://127.0.0.1:1", project="alpha").settings.project == "alpha"
    assert AsyncClient("http://127.0.0.1:1", project="").settings.project == ""
    monkeypatch.delenv("EVALSI_PROJECT")
    assert AsyncClient("http://127.0.0.1:1").settings.project == ""
    twin = AsyncClient("http://127.0.0.1:1", project="alpha")._twin()
    assert twin.settings.project == "alpha"
