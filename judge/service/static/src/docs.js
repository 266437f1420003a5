// /docs: Swagger UI from the local swagger-ui-dist package (no CDN), on the app's OpenAPI document.
window.SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
