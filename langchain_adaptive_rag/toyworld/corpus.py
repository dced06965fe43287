"""The passage corpus of a toy world: one short Wikipedia-style passage per entity.

Each fact is stated by one sentence, and the reasoning steps of the toy questions repeat
those sentences word for word, so reading a fact from a passage means finding the
sentence that starts like the step being written and copying its end. A director's
passage names the film, as a biography names its subject's work, so a question about a
film retrieves the passages of both of its hops.
"""

from __future__ import annotations

from langchain_core.documents import Document

from langchain_adaptive_rag.toyworld.world import City, Film, Person, ToyWorld

__all__ = [
    "birth_sentence",
    "build_corpus",
    "city_passage",
    "director_sentence",
    "father_sentence",
    "film_passage",
    "mother_sentence",
    "person_passage",
]


def birth_sentence(person: Person) -> str:
    """``"{name} was born in {year} in {city}."``."""
    return f"{person.name} was born in {person.birth_year} in {person.birth_city}."


def father_sentence(person: Person) -> str:
    """``"The father of {name} was {father}."``."""
    return f"The father of {person.name} was {person.father}."


def mother_sentence(person: Person) -> str:
    """``"The mother of {name} was {mother}."``."""
    return f"The mother of {person.name} was {person.mother}."


def director_sentence(film: Film, director: Person) -> str:
    """``"The film {title} was directed by {director}."``."""
    return f"The film {film.title} was directed by {director.name}."


def person_passage(person: Person, film: Film | None = None) -> str:
    """Birth, occupation and parents of a person.

    Args:
        person: The person.
        film: The film the person directed, if any: the occupation sentence names it
            ("X was the director of the film T.").

    Returns:
        The passage.
    """
    job = f"the director of the film {film.title}" if film is not None else f"a {person.job}"
    return (
        f"{birth_sentence(person)} {person.name} was {job}. "
        f"{father_sentence(person)} {mother_sentence(person)}"
    )


def film_passage(film: Film, director: Person) -> str:
    """Director and release year of a film."""
    return f"{director_sentence(film, director)} It was released in {film.year}."


def city_passage(city: City) -> str:
    """The country a city lies in."""
    return f"{city.name} is a city in {city.country}."


def build_corpus(world: ToyWorld, *, include_cities: bool = True) -> list[Document]:
    """One passage per entity, known and unknown alike.

    Args:
        world: The world.
        include_cities: Add the city passages.

    Returns:
        Documents with ``id`` and a ``metadata`` of ``id``, ``title`` and ``known``
        (``title`` is the person's name, the film's title or the city's name).
    """
    directed = {film.director: film for film in world.films}
    docs = [
        Document(
            id=film.id,
            page_content=film_passage(film, world.director(film)),
            metadata={"id": film.id, "title": film.title, "known": film.known},
        )
        for film in world.films
    ]
    docs.extend(
        Document(
            id=person.id,
            page_content=person_passage(person, directed.get(person.id)),
            metadata={"id": person.id, "title": person.name, "known": person.known},
        )
        for person in world.people
    )
    if include_cities:
        docs.extend(
            Document(
                id=city.id,
                page_content=city_passage(city),
                metadata={"id": city.id, "title": city.name, "known": True},
            )
            for city in world.cities
        )
    return docs
