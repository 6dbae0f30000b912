// Starts Swagger UI on /docs with the service's own OpenAPI document (a file, so that the page's
// Content-Security-Policy allows scripts from this server only, and no inline one).
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
