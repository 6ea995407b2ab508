"""Bilingual troubleshooting knowledge base: config, the KnowledgeBase service, answers, doors."""

__version__ = "0.1.0"
