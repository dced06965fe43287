"""A seeded synthetic encyclopaedia: people, films and cities.

Every fact belongs to one entity, and every entity is either *known* (its facts appear in
the toy model's training text) or *unknown* (its facts appear only in the passage corpus).
Names, film titles, cities and years come from closed word pools, so the toy tokenizer can
keep each of them whole. Two disjoint sets of pools exist: [`WORLD_POOLS`][] for the
evaluated world and [`PRACTICE_POOLS`][] for the fresh entities of reading practice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = [
    "PRACTICE_POOLS",
    "WORLD_POOLS",
    "YEARS",
    "City",
    "Film",
    "Line",
    "NamePools",
    "Person",
    "ToyWorld",
    "WorldSizes",
    "generate_world",
]


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _pairs(text: str) -> tuple[tuple[str, str], ...]:
    return tuple((a, b) for a, b in (item.split(":") for item in text.split()))


Line = tuple[str, str, str]
"""A paternal line: (child id, father id, grandfather id)."""

YEARS: tuple[int, ...] = tuple(range(1840, 2001))
"""Every year a fact can mention (birth years and release years)."""


@dataclass(frozen=True)
class NamePools:
    """Closed word pools that entity names are drawn from."""

    first_names: tuple[str, ...]
    """Given names (one word each)."""
    last_names: tuple[str, ...]
    """Family names (one word each), inherited from the father."""
    title_adjectives: tuple[str, ...]
    """First words of film titles."""
    title_nouns: tuple[str, ...]
    """Second words of film titles."""
    cities: tuple[tuple[str, str], ...]
    """(city, country) pairs."""
    jobs: tuple[str, ...]
    """Occupations of people who are not film directors."""

    def words(self) -> tuple[str, ...]:
        """Every word of every pool (countries and job words included)."""
        cities = tuple(w for pair in self.cities for w in pair)
        jobs = tuple(w for job in self.jobs for w in job.split())
        return (
            self.first_names
            + self.last_names
            + self.title_adjectives
            + self.title_nouns
            + cities
            + jobs
        )


WORLD_POOLS = NamePools(
    first_names=_words(
        "Anna Carl Maria Erik Ingrid Lars Helga Olaf Greta Sven Astrid Nils Karin Magnus Elsa "
        "Gustav Sigrid Henrik Britt Johan Freya Anders Liv Torben Maja Oskar Signe Axel Hedda "
        "Viggo Tove Rune Dagny Leif Solveig Bertil Runa Egil Vera Harald Agnes Knut Linnea Tor "
        "Ebba Stig Hilda Arvid Edith Folke"
    ),
    last_names=_words(
        "Berg Lind Holm Dahl Strand Lund Nyberg Sand Falk Wik Borg Hagen Moen Engel Rudd "
        "Vikstrom Ekman Fors Kvist Norlin Stenberg Lindqvist Hallberg Ask Bjork Grahn Ljung "
        "Mork Rosen Tell Ulver Westin Aberg Bohm Carlin Dunker Ekdal Frost Gran Hedlund"
    ),
    title_adjectives=_words(
        "Blue Silent Golden Broken Hidden Last Winter Dark Northern Frozen Quiet Burning Lost "
        "Wild Pale Bright Crimson Distant Empty Hollow"
    ),
    title_nouns=_words(
        "Harbour River Mountain Garden Letter Journey Bridge Forest Island Tower Shadow Window "
        "Horizon Valley Station Mirror Lantern Meadow Summit Orchard"
    ),
    cities=_pairs(
        "Oslo:Norway Bergen:Norway Trondheim:Norway Stavanger:Norway Stockholm:Sweden "
        "Uppsala:Sweden Malmo:Sweden Gothenburg:Sweden Copenhagen:Denmark Aarhus:Denmark "
        "Odense:Denmark Helsinki:Finland Turku:Finland Tampere:Finland Reykjavik:Iceland"
    ),
    jobs=("painter", "writer", "composer", "architect", "poet", "sculptor", "photographer"),
)
"""Pools of the evaluated world (Nordic names, Nordic cities)."""

PRACTICE_POOLS = NamePools(
    first_names=_words(
        "Marco Lucia Paolo Giulia Diego Elena Mateo Sofia Luca Chiara Pablo Carmen Rafael Ines "
        "Bruno Alba Enzo Nora Tomas Rosa Hugo Clara Dario Irene Felipe Marta Gino Teresa Ivo "
        "Lina Alonso Bianca Renzo Pia Sergio Adela"
    ),
    last_names=_words(
        "Rossi Costa Ferri Greco Bruni Conti Marino Ricci Vidal Moreno Ortega Navarro Serra "
        "Romero Castro Rojas Pardo Lopez Silva Duarte Soto Nieto Galli Fontana Leone Villa "
        "Bravo Prieto Arias Campos"
    ),
    title_adjectives=_words(
        "Scarlet Velvet Endless Secret Sleeping Amber Iron Silver Restless Painted Falling Rising"
    ),
    title_nouns=_words(
        "Desert Canyon Palace Castle Ocean Carnival Compass Voyage Citadel Labyrinth Feather Anchor"
    ),
    cities=_pairs(
        "Milan:Italy Turin:Italy Naples:Italy Genoa:Italy Bologna:Italy Madrid:Spain "
        "Seville:Spain Valencia:Spain Lisbon:Portugal Porto:Portugal"
    ),
    jobs=("dancer", "singer", "novelist", "engineer", "physician", "chemist", "historian"),
)
"""Pools of reading practice (Southern European names and cities), disjoint from
[`WORLD_POOLS`][] word for word."""

DIRECTOR_JOB = "film director"
"""The occupation of every film's director."""


@dataclass(frozen=True)
class Person:
    """A person with one encyclopaedia passage."""

    id: str
    """Stable identifier, e.g. ``"person-0042"``."""
    name: str
    """Full name (given name and family name)."""
    birth_year: int
    """Year of birth."""
    birth_city: str
    """City of birth (a [`City`][] name)."""
    job: str
    """Occupation."""
    father: str
    """Full name of the father (a [`Person`][] of the world for family lines)."""
    mother: str
    """Full name of the mother."""
    known: bool
    """Whether this person's facts are in the toy model's training text."""


@dataclass(frozen=True)
class Film:
    """A film with one encyclopaedia passage."""

    id: str
    """Stable identifier, e.g. ``"film-0007"``."""
    title: str
    """Title (two words)."""
    director: str
    """Id of the directing [`Person`][]."""
    year: int
    """Release year."""
    known: bool
    """Whether this film's facts are in the toy model's training text."""
    training_only: bool = False
    """Asked about in training only: the evaluation questions leave it out."""


@dataclass(frozen=True)
class City:
    """A city with one encyclopaedia passage."""

    id: str
    """Stable identifier, e.g. ``"city-03"``."""
    name: str
    """City name."""
    country: str
    """Country the city lies in."""


@dataclass(frozen=True)
class WorldSizes:
    """How many entities of each kind a world has."""

    known_films: int = 70
    """Known films whose director is known too."""
    known_films_unknown_director: int = 40
    """Known films whose director is unknown."""
    unknown_films: int = 30
    """Unknown films (their directors are unknown)."""
    family_lines: int = 30
    """Paternal lines grandfather -> father -> child (for grandfather questions)."""
    unknown_fathers: int = 10
    """Lines whose child is known and whose father is unknown."""
    unknown_children: int = 8
    """Lines whose child is unknown (the first hop is unknown)."""
    extra_people: int = 20
    """People who appear in no question (distractors sharing names with others)."""
    training_films: int = 20
    """Known films with known directors that only training asks about: they teach the
    closed-book form of the evaluated compositional question on other films."""
    training_lines: int = 10
    """Known family lines that only training asks grandfather questions about, each with a
    family name no evaluated line has (where the pool allows)."""

    def __post_init__(self) -> None:
        if self.unknown_fathers + self.unknown_children > self.family_lines:
            msg = (
                f"WorldSizes: unknown_fathers + unknown_children "
                f"({self.unknown_fathers} + {self.unknown_children}) must not exceed "
                f"family_lines ({self.family_lines})."
            )
            raise ValueError(msg)


@dataclass(frozen=True)
class ToyWorld:
    """People, films and cities of one seeded world."""

    seed: int
    """Seed it was generated from."""
    people: tuple[Person, ...]
    """Every person."""
    films: tuple[Film, ...]
    """Every film."""
    cities: tuple[City, ...]
    """Every city."""
    lines: tuple[Line, ...]
    """Paternal lines as (child id, father id, grandfather id)."""
    training_lines: tuple[Line, ...] = ()
    """Known paternal lines that only training asks about."""
    _by_id: dict[str, Person] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {p.id: p for p in self.people})

    def person(self, person_id: str) -> Person:
        """The person with this id."""
        return self._by_id[person_id]

    def director(self, film: Film) -> Person:
        """The director of a film."""
        return self._by_id[film.director]

    @property
    def known_people(self) -> tuple[Person, ...]:
        """People whose facts are in the training text."""
        return tuple(p for p in self.people if p.known)

    @property
    def evaluated_films(self) -> tuple[Film, ...]:
        """Films the evaluation questions ask about (not the training-only ones)."""
        return tuple(f for f in self.films if not f.training_only)

    @property
    def evaluated_people(self) -> tuple[Person, ...]:
        """People the evaluation questions may ask about.

        Every person but the directors of the training-only films and the people of the
        training-only lines.
        """
        left_out = {f.director for f in self.films if f.training_only}
        left_out |= {person_id for line in self.training_lines for person_id in line}
        return tuple(p for p in self.people if p.id not in left_out)

    @property
    def known_films(self) -> tuple[Film, ...]:
        """Films whose facts are in the training text."""
        return tuple(f for f in self.films if f.known)

    def names(self) -> frozenset[str]:
        """Every person name and film title of the world (parents' names included)."""
        people = {p.name for p in self.people} | {p.father for p in self.people}
        people |= {p.mother for p in self.people}
        return frozenset(people | {f.title for f in self.films})


class _Namer:
    """Draws unique full names and titles from pools."""

    def __init__(
        self, rng: random.Random, pools: NamePools, taken: frozenset[str] = frozenset()
    ) -> None:
        self.rng = rng
        self.pools = pools
        self.used: set[str] = set(taken)

    def name(self, last: str | None = None) -> str:
        for _ in range(10_000):
            first = self.rng.choice(self.pools.first_names)
            full = f"{first} {last or self.rng.choice(self.pools.last_names)}"
            if full not in self.used:
                self.used.add(full)
                return full
        msg = "The name pools are too small for this many people."
        raise ValueError(msg)

    def title(self) -> str:
        for _ in range(10_000):
            full = (
                f"{self.rng.choice(self.pools.title_adjectives)} "
                f"{self.rng.choice(self.pools.title_nouns)}"
            )
            if full not in self.used:
                self.used.add(full)
                return full
        msg = "The title pools are too small for this many films."
        raise ValueError(msg)


def generate_world(
    seed: int = 0,
    *,
    sizes: WorldSizes | None = None,
    pools: NamePools = WORLD_POOLS,
    reserved: frozenset[str] = frozenset(),
    id_prefix: str = "",
) -> ToyWorld:
    """Generate a world from a seed (same seed and arguments, same world).

    Args:
        seed: Random seed.
        sizes: Entity counts (default [`WorldSizes`][]).
        pools: Word pools to draw names, titles, cities and jobs from.
        reserved: Names and titles that must not be used (another world's).
        id_prefix: Prefix of every entity id (keeps ids of several worlds apart).

    Returns:
        The world.
    """
    size = sizes or WorldSizes()
    rng = random.Random(seed)
    namer = _Namer(rng, pools, reserved)
    cities = tuple(
        City(id=f"{id_prefix}city-{i:02d}", name=name, country=country)
        for i, (name, country) in enumerate(pools.cities)
    )
    people: list[Person] = []

    def add(name: str, year: int, job: str, known: bool, father: str | None = None) -> Person:
        person = Person(
            id=f"{id_prefix}person-{len(people):04d}",
            name=name,
            birth_year=year,
            birth_city=rng.choice(cities).name,
            job=job,
            father=father or namer.name(name.split()[-1]),
            mother=namer.name(),
            known=known,
        )
        people.append(person)
        return person

    films: list[Film] = []
    film_kinds = (
        [(True, True)] * size.known_films
        + [(True, False)] * size.known_films_unknown_director
        + [(False, False)] * size.unknown_films
    )

    def film(known: bool, director_known: bool, training_only: bool = False) -> None:
        born = rng.randint(1880, 1960)
        director = add(namer.name(), born, DIRECTOR_JOB, director_known)
        films.append(
            Film(
                id=f"{id_prefix}film-{len(films):04d}",
                title=namer.title(),
                director=director.id,
                year=min(2000, born + rng.randint(25, 45)),
                known=known,
                training_only=training_only,
            )
        )

    def line(
        last: str, child_known: bool, father_known: bool, grandfather_known: bool | None
    ) -> Line:
        """Grandfather, father and child (a grandfather of unset ``known`` draws it)."""
        grandfather_name, father_name = namer.name(last), namer.name(last)
        grandfather_year = rng.randint(1840, 1890)
        job = rng.choice(pools.jobs)
        grandfather = add(
            grandfather_name,
            grandfather_year,
            job,
            rng.random() < 0.5 if grandfather_known is None else grandfather_known,
        )
        father_year = grandfather_year + rng.randint(20, 40)
        father = add(
            father_name, father_year, rng.choice(pools.jobs), father_known, grandfather.name
        )
        child_year = min(2000, father_year + rng.randint(20, 40))
        child = add(namer.name(last), child_year, rng.choice(pools.jobs), child_known, father.name)
        return child.id, father.id, grandfather.id

    for film_known, director_known in film_kinds:
        film(film_known, director_known)
    lines: list[Line] = []
    for index in range(size.family_lines):
        child_known = index >= size.unknown_children
        father_known = child_known and index >= size.unknown_children + size.unknown_fathers
        last = rng.choice(pools.last_names)
        lines.append(line(last, child_known, father_known, None))
    for _ in range(size.extra_people):
        add(namer.name(), rng.randint(1850, 1970), rng.choice(pools.jobs), rng.random() < 0.5)
    # Training-only entities come last, so the evaluated entities do not depend on them.
    for _ in range(size.training_films):
        film(True, True, training_only=True)
    names = {person.id: person.name for person in people}
    used = {names[child].split()[-1] for child, _, _ in lines}
    fresh = [name for name in pools.last_names if name not in used]
    families = rng.sample(fresh, min(len(fresh), size.training_lines))
    families += rng.choices(pools.last_names, k=size.training_lines - len(families))
    training_lines = [line(last, True, True, True) for last in families]
    return ToyWorld(
        seed=seed,
        people=tuple(people),
        films=tuple(films),
        cities=cities,
        lines=tuple(lines),
        training_lines=tuple(training_lines),
    )
