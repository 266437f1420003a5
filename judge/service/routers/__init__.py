"""The service's routes, one ``APIRouter`` per audience: submissions, exercises, operations."""
