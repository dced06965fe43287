"""One compiled LangGraph graph per adaptive-RAG method."""
