import pytest

from notes_api.api.router import HTTPError, Request, Response, Router


def echo_params(request: Request) -> Response:
    return Response(200, {"params": request.path_params})


def make_router() -> Router:
    router = Router()
    router.add("GET", "/notes", lambda request: Response(200, {"list": True}))
    router.add("GET", "/notes/{note_id}", echo_params)
    router.add("DELETE", "/notes/{note_id}", lambda request: Response(204))
    return router


def test_dispatch_static_route():
    response = make_router().dispatch(Request("GET", "/notes"))
    assert response.status == 200
    assert response.body == {"list": True}


def test_dispatch_extracts_path_params_and_ignores_trailing_slash():
    response = make_router().dispatch(Request("GET", "/notes/42/"))
    assert response.body == {"params": {"note_id": "42"}}


def test_unknown_path_raises_404():
    with pytest.raises(HTTPError) as info:
        make_router().dispatch(Request("GET", "/missing"))
    assert info.value.status == 404


def test_wrong_method_raises_405_with_allow_header():
    with pytest.raises(HTTPError) as info:
        make_router().dispatch(Request("POST", "/notes/1"))
    assert info.value.status == 405
    assert info.value.headers == {"Allow": "DELETE, GET"}


def test_request_from_raw_parses_query_and_method():
    request = Request.from_raw("get", "/notes?page=2&page_size=10", {"X-Test": "1"})
    assert request.method == "GET"
    assert request.path == "/notes"
    assert request.query == {"page": "2", "page_size": "10"}


def test_header_lookup_is_case_insensitive():
    request = Request("GET", "/", headers={"Authorization": "Bearer abc"})
    assert request.header("authorization") == "Bearer abc"
    assert request.header("x-missing", "default") == "default"


def test_invalid_json_body_raises_400():
    with pytest.raises(HTTPError) as info:
        Request("POST", "/notes", body=b"{not json").json()
    assert info.value.status == 400


def test_response_serialisation():
    assert Response(200, {"a": 1}).to_bytes() == b'{"a":1}'
    assert Response(204).to_bytes() == b""
    assert Response.error(404, "nope").body == {"error": "nope"}
