"""Tool: schemas from typed signatures and docstrings in every style, the API-neutral surface."""

from __future__ import annotations

import json
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from asyncsession.exceptions import UsageError
from asyncsession.tools import Tool, tool


def google(city: str, unit: Literal["C", "F"] = "C", *, days: int = 1) -> str:
    """Tell the weather of a city.

    Use it for today's weather or a short forecast.

    Args:
        city: The city's name,
            as people write it.
        unit: The temperature unit.
        days: How many days ahead.

    Returns:
        The forecast.
    """
    return f"{city} {unit} {days}"


def numpy(city: str, unit: Literal["C", "F"] = "C", *, days: int = 1) -> str:
    """Tell the weather of a city.

    Use it for today's weather or a short forecast.

    Parameters
    ----------
    city : str
        The city's name,
        as people write it.
    unit : str
        The temperature unit.
    days
        How many days ahead.

    Returns
    -------
    str
        The forecast.
    """
    return f"{city} {unit} {days}"


def sphinx(city: str, unit: Literal["C", "F"] = "C", *, days: int = 1) -> str:
    """Tell the weather of a city.

    Use it for today's weather or a short forecast.

    :param city: The city's name,
        as people write it.
    :param str unit: The temperature unit.
    :param days: How many days ahead.
    :returns: The forecast.
    """
    return f"{city} {unit} {days}"


@pytest.mark.parametrize(
    "function",
    [
        pytest.param(google, id="google"),
        pytest.param(numpy, id="numpy"),
        pytest.param(sphinx, id="sphinx"),
    ],
)
def test_docstring_descriptions_reach_the_schema(function: object) -> None:
    """Parameter descriptions in Google, NumPy and Sphinx style end up in the schema."""
    made = Tool.from_function(function)  # type: ignore[arg-type]
    assert made.description == (
        "Tell the weather of a city.\n\nUse it for today's weather or a short forecast."
    )
    properties = made.parameters["properties"]
    assert properties["city"]["description"] == "The city's name,\nas people write it."
    assert properties["unit"]["description"] == "The temperature unit."
    assert properties["days"]["description"] == "How many days ahead."
    assert properties["unit"]["enum"] == ["C", "F"]
    assert made.parameters["required"] == ["city"]


def test_a_docstring_may_open_with_its_parameters() -> None:
    """A docstring with only a parameters section gives descriptions and an empty description."""

    def bare(x: int) -> int:
        """
        Args:
            x: The number.
        """
        return x

    made = Tool.from_function(bare)
    assert made.description == ""
    assert made.parameters["properties"]["x"]["description"] == "The number."


def test_undocumented_functions_get_bare_schemas() -> None:
    """Without a docstring the schema still has every typed parameter, with no description."""

    def plain(x: int, y: str = "a") -> str:
        return f"{x}{y}"

    made = Tool.from_function(plain, description="Join.")
    assert made.description == "Join."
    assert made.parameters["properties"] == {
        "x": {"type": "integer"},
        "y": {"type": "string", "default": "a"},
    }


def test_annotated_constraints_and_field_descriptions_win() -> None:
    """``Annotated[..., Field(...)]`` constraints reach the schema; the docstring fills gaps."""

    def count(n: Annotated[int, Field(ge=1, le=5)]) -> int:
        """Count.

        Args:
            n: How far.
        """
        return n

    schema = Tool.from_function(count).parameters["properties"]["n"]
    assert schema == {"type": "integer", "minimum": 1, "maximum": 5, "description": "How far."}


def test_schemas_are_plain_json_without_generated_titles() -> None:
    """The schema is plain JSON: no pydantic titles, closed to unknown fields."""
    made = Tool.from_function(google)
    schema = json.loads(json.dumps(made.parameters))
    assert "title" not in schema
    assert all("title" not in prop for prop in schema["properties"].values())
    assert schema["additionalProperties"] is False


async def test_keyword_only_and_positional_only_parameters_are_passed_right() -> None:
    """Positional-only parameters are passed by position, keyword-only ones by keyword."""

    def join(a: str, /, b: str, *, c: str) -> str:
        return a + b + c

    assert await Tool.from_function(join).invoke('{"a": "1", "b": "2", "c": "3"}') == "123"


async def test_a_method_is_a_tool_without_self() -> None:
    """A bound method makes a tool whose schema leaves out ``self``."""

    class Counter:
        def __init__(self) -> None:
            self.total = 0

        async def add(self, by: int) -> int:
            """Add to the total.

            Args:
                by: The amount.
            """
            self.total += by
            return self.total

    counter = Counter()
    add = Tool.from_function(counter.add)
    assert list(add.parameters["properties"]) == ["by"]
    assert await add.invoke('{"by": 2}') == "2"
    assert counter.total == 2


def test_the_surface_is_api_neutral() -> None:
    """A tool is a name, a description, a JSON schema, ``strict`` and ``invoke``: no SDK types."""
    made = tool(name="forecast", strict=True)(google)
    assert (made.name, made.strict) == ("forecast", True)
    assert isinstance(made.description, str)
    json.dumps(dict(made.parameters))
    assert callable(made.invoke)


def test_from_model_drops_the_models_own_title_and_docstring() -> None:
    """The model's docstring is for developers; only its field descriptions reach the schema."""

    class Args(BaseModel):
        """Developer notes."""

        query: str = Field(description="What to look for.")

    async def run(query: str) -> str:
        return query

    schema = Tool.from_model("find", "Find.", Args, run).parameters
    assert schema == {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for."}},
        "required": ["query"],
    }


def test_invalid_names_are_refused() -> None:
    """A name the APIs would refuse is a usage error when the tool is built."""

    async def run(arguments: str) -> str:
        return arguments

    with pytest.raises(UsageError, match="Invalid tool name"):
        Tool(name="a b", description="", parameters={"type": "object"}, function=run)
    with pytest.raises(UsageError, match="Invalid tool name"):
        Tool(name="x" * 65, description="", parameters={"type": "object"}, function=run)
