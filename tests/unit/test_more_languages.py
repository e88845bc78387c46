"""C#, Kotlin, PHP, Swift and Scala repositories are planned as the other languages are.

Before, the offline planner said of a C# or PHP repository "has no source code to plan against"; their test
files (src/Shop.Tests/PriceTests.cs, Tests/KitTests/KitTests.swift) were not tests, and a new test had no
name of its language. Swift and Scala files had no symbols: no plan named a function to change in them, and
their tests had no command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write
from wfqueue.analysis import build_index
from wfqueue.analysis.brace_langs import braced_symbols
from wfqueue.analysis.files import is_test_path
from wfqueue.lite.models import LitePlanDraft
from wfqueue.providers.offline.assess import assess, signals
from wfqueue.providers.offline.lite_plan import plan_tasks
from wfqueue.providers.offline.tests_placement import _new_test_file
from wfqueue.sandboxed_commands import refusal

CSHARP = """using System;
namespace Shop
{
    [Serializable]
    public sealed class Cart : ICart
    {
        public const int Max = 10;
        private readonly List<int> _items = new();
        public Cart() { }
        public int Count { get; set; }
        public Dictionary<string, int> Totals() => new();
        public async Task<bool> AddAsync(int amount, string note = "{ not a brace")
        {
            if (amount < 0) { return false; }
            return true;
        }
        private void Helper(int x) { }
    }
}
"""
KOTLIN = """package shop
data class Price(val amount: Int)
class Cart(private val repo: Repo) {
    fun add(amount: Int): Boolean {
        if (amount < 0) { return false }
        return true
    }
    companion object {
        const val MAX = 10
        fun of(n: Int): Cart = Cart(Repo())
    }
}
fun String.slug(): String = lowercase()
class CartTest {
    @Test fun `adds an item`() { }
}
"""
PHP = """<?php
namespace App\\Models;
# a comment with a { brace
#[Entity] final class User extends Model
{
    public function name(): string { return $this->first . " {" . $this->last; }
    #[Hook('boot')] protected static function boot() { }
}
function helper($x) { return $x; }
"""


@pytest.mark.parametrize(("text", "language", "expected"), [
    (CSHARP, "csharp", [("class", "Cart", 5, 18), ("constant", "Cart.Max", 7, 7), ("method", "Cart.Cart", 9, 9),
                        ("method", "Cart.Count", 10, 10), ("method", "Cart.Totals", 11, 11),
                        ("method", "Cart.AddAsync", 12, 16), ("method", "Cart.Helper", 17, 17)]),
    (KOTLIN, "kotlin", [("class", "Price", 2, 2), ("class", "Cart", 3, 12), ("method", "Cart.add", 4, 7),
                        ("constant", "Cart.Companion.MAX", 9, 9), ("method", "Cart.Companion.of", 10, 10),
                        ("function", "String.slug", 13, 13), ("class", "CartTest", 14, 16),
                        ("method", "CartTest.`adds an item`", 15, 15)]),
    (PHP, "php", [("class", "User", 4, 8), ("method", "User.name", 6, 6), ("method", "User.boot", 7, 7),
                  ("function", "helper", 9, 9)]),
])
def test_symbols_of_csharp_kotlin_and_php(text: str, language: str, expected: list[tuple[str, str, int, int]]) -> None:
    """Named without a C# namespace (as code and requirements name them: Cart.AddAsync); braces in strings and
    comments do not end a body."""
    assert [(s.kind, s.qualname, s.line, s.end_line) for s in braced_symbols(text, language)] == expected


@pytest.mark.parametrize(("path", "test"), [
    ("src/Shop.Tests/CartTests.cs", True), ("src/Shop/Cart.cs", False), ("Tests/KitTests/KitTests.swift", True),
    ("tests/Unit/UserTest.php", True), ("src/main/kotlin/a/CartTest.kt", True), ("src/Shop/Contest.cs", False),
    ("src/main/scala/a/TypeSpec.scala", False), ("src/test/scala/a/CartSpec.scala", True),
])
def test_test_files_of_class_named_languages(path: str, test: bool) -> None:
    assert is_test_path(path) is test


def lite(root: Path, requirement: str) -> LitePlanDraft:
    index = build_index(root)
    return plan_tasks(index, requirement, "s", assess(requirement, signals(index, requirement), False), [], [])


def test_a_csharp_fix_changes_its_method_and_runs_its_test_class(tmp_path: Path) -> None:
    repo = write(tmp_path, {
        "Shop.sln": "", "src/Shop/Shop.csproj": "<Project/>\n", "src/Shop/Cart.cs": CSHARP,
        "src/Shop.Tests/Shop.Tests.csproj": "<Project/>\n",
        "src/Shop.Tests/CartTests.cs": "public class CartTests { public void Adds() { new Cart().AddAsync(1); } }\n"})
    *changes, test = lite(repo, "Fix Cart.AddAsync to reject negative amounts").tasks
    assert next((f.path, f.target) for t in changes for f in t.files) == ("src/Shop/Cart.cs", "Cart.AddAsync")
    assert [(f.path, f.action) for f in test.files] == [("src/Shop.Tests/CartTests.cs", "modify")]
    assert test.convergence.verification == "dotnet test --filter FullyQualifiedName~CartTests"
    assert refusal(test.convergence.verification) is None  # execution's sandboxed runner runs it


def test_a_php_test_is_named_and_run_as_phpunit_does(tmp_path: Path) -> None:
    repo = write(tmp_path, {"composer.json": '{"require-dev": {"phpunit/phpunit": "^10"}}\n',
                            "app/Models/User.php": PHP,
                            "tests/Unit/OrderTest.php": "<?php\nclass OrderTest extends TestCase {}\n"})
    [task] = lite(repo, "Add tests for User.name").tasks
    assert [(f.path, f.action) for f in task.files] == [("tests/Unit/UserTest.php", "create")]
    assert task.convergence.verification == "vendor/bin/phpunit tests/Unit/UserTest.php"
    assert refusal(task.convergence.verification) is None


SWIFT = """import Foundation

/// A cart. "func notAFunction() {"
public final class Cart {
    private(set) var items: [Item] = []
    let id: UUID

    public init(id: UUID = UUID()) { self.id = id }

    public var total: Decimal {
        items.reduce(0) { $0 + $1.price }
    }

    @discardableResult
    public func add(_ item: Item) -> Int {
        if items.count > 10 { print("{") }
        return items.count
    }
}

extension Cart: CustomStringConvertible {
    class func shared() -> Cart { Cart() }
    func remove<T: Equatable>(where name: T) {
        let s = \"\"\"
        func notAFunction() {
        \"\"\"
    }
}

protocol Gateway {
    func charge(_ amount: Decimal) async throws
}

func checkout(cart: Cart) async throws {}
"""
SCALA = """package shop

final case class Item(name: String, price: BigDecimal)

class Cart(val id: String) {
  def add(item: Item): Int = {
    val s = "def notAMethod() {"
    1
  }
  def total: BigDecimal = 0
}

object Cart {
  final val MAX_ITEMS = 100
  def empty(id: String): Cart = new Cart(id)
}

sealed trait Gateway {
  def charge(amount: BigDecimal): Unit
}
"""


@pytest.mark.parametrize(("text", "language", "expected"), [
    (SWIFT, "swift", [("class", "Cart", 4, 19), ("method", "Cart.init", 8, 8), ("method", "Cart.total", 10, 12),
                      ("method", "Cart.add", 15, 18), ("method", "Cart.shared", 22, 22),
                      ("method", "Cart.remove", 23, 27),
                      ("class", "Gateway", 30, 32), ("method", "Gateway.charge", 31, 31),
                      ("function", "checkout", 34, 34)]),
    (SCALA, "scala", [("class", "Item", 3, 3), ("class", "Cart", 5, 11), ("method", "Cart.add", 6, 9),
                      ("method", "Cart.total", 10, 10), ("class", "Cart", 13, 16),
                      ("constant", "Cart.MAX_ITEMS", 14, 14), ("method", "Cart.empty", 15, 15),
                      ("class", "Gateway", 18, 20), ("method", "Gateway.charge", 19, 19)]),
])
def test_symbols_of_swift_and_scala(text: str, language: str, expected: list[tuple[str, str, int, int]]) -> None:
    """An extension's functions are its type's; a stored property is data, a computed one code; braces and
    "func" in strings and comments declare nothing."""
    assert [(s.kind, s.qualname, s.line, s.end_line) for s in braced_symbols(text, language)] == expected


@pytest.mark.parametrize(("files", "test", "verification"), [
    ({"Package.swift": "// swift-tools-version:5.9\n", "Sources/Shop/Cart.swift": SWIFT,
      "Tests/ShopTests/OrderTests.swift": "import XCTest\nfinal class OrderTests: XCTestCase {}\n"},
     "Tests/ShopTests/CartTests.swift", "swift test --filter CartTests"),
    ({"build.sbt": "name := \"shop\"\n", "src/main/scala/shop/Cart.scala": SCALA,
      "src/test/scala/shop/OrderSpec.scala": "class OrderSpec extends AnyFlatSpec {}\n"},
     "src/test/scala/shop/CartSpec.scala", "sbt 'testOnly *CartSpec'"),
])
def test_a_swift_or_scala_fix_changes_its_function_and_runs_its_test_class(
        files: dict[str, str], test: str, verification: str, tmp_path: Path) -> None:
    *changes, tests = lite(write(tmp_path, files), "Fix Cart.add so that it refuses a second copy of an item").tasks
    assert next(f.target for t in changes for f in t.files) == "Cart.add"
    assert [(f.path, f.action) for f in tests.files] == [(test, "create")]
    assert tests.convergence.verification == verification
    assert refusal(verification) is None  # execution's sandboxed runner runs it


def test_a_php_test_class_named_without_its_file_is_that_file(tmp_path: Path) -> None:
    repo = write(tmp_path, {"phpunit.xml": "<phpunit/>\n", "app/Pricing.php": "<?php\nclass Pricing\n{\n"
                            "    public function discount() { return 0; }\n}\n",
                            "tests/Unit/OrderTest.php": "<?php\nclass OrderTest extends TestCase {}\n"})
    [task] = lite(repo, "Add a new DiscountTest covering Pricing.discount").tasks
    assert [(f.path, f.action) for f in task.files] == [("tests/Unit/DiscountTest.php", "create")]


def test_a_new_test_goes_into_the_sources_own_package(tmp_path: Path) -> None:
    """ripgrep: a test for the binary's crates/core/flags/hiargs.rs was created in crates/matcher/tests/ (another
    crate's, which cannot reach the binary's code, and which `cargo test` at the root does not run). gson: a test
    for internal/bind/ReflectiveTypeAdapterFactory.java went to internal/bind/util/ (the nearest-folder rule's tie
    broken by name), out of reach of the package-private code it tests."""
    rust = build_index(write(tmp_path / "rg", {
        "Cargo.toml": "[package]\nname = 'rg'\n[[bin]]\npath = 'crates/core/main.rs'\n",
        "crates/core/main.rs": "fn main() {}\n",
        "crates/core/flags/hiargs.rs": "pub struct HiArgs {}\n",
        "crates/matcher/Cargo.toml": "[package]\nname = 'grep-matcher'\n",
        "crates/matcher/src/lib.rs": "pub fn is_match() {}\n",
        "crates/matcher/tests/test_matcher.rs": "#[test]\nfn matches() {}\n",
        "tests/feature.rs": "#[test]\nfn feature() {}\n",
    }))
    assert _new_test_file(rust, "crates/core/flags/hiargs.rs").startswith("tests/")
    # A member crate without tests of its own gets its own tests/ folder, not a neighbour's.
    member = build_index(write(tmp_path / "ws", {
        "Cargo.toml": "[workspace]\nmembers = ['crates/*']\n",
        "crates/a/Cargo.toml": "[package]\nname = 'a'\n", "crates/a/src/lib.rs": "pub fn a() {}\n",
        "crates/b/Cargo.toml": "[package]\nname = 'b'\n", "crates/b/src/lib.rs": "pub fn b() {}\n",
        "crates/b/tests/x.rs": "#[test]\nfn x() {}\n",
    }))
    assert _new_test_file(member, "crates/a/src/lib.rs").startswith("crates/a/tests/")
    java = build_index(write(tmp_path / "gson", {
        "gson/pom.xml": "<project/>",
        "gson/src/main/java/com/google/gson/internal/bind/ReflectiveTypeAdapterFactory.java":
            "package com.google.gson.internal.bind;\npublic final class ReflectiveTypeAdapterFactory {}\n",
        "gson/src/test/java/com/google/gson/internal/bind/util/ISO8601UtilsTest.java":
            "package com.google.gson.internal.bind.util;\npublic class ISO8601UtilsTest {}\n",
        "gson/src/test/java/com/google/gson/functional/MapTest.java":
            "package com.google.gson.functional;\npublic class MapTest {}\n",
    }))
    assert _new_test_file(java, "gson/src/main/java/com/google/gson/internal/bind/ReflectiveTypeAdapterFactory.java") \
        == "gson/src/test/java/com/google/gson/internal/bind/ReflectiveTypeAdapterFactoryTest.java"
